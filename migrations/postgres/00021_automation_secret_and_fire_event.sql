-- +goose Up
-- An event trigger's secret must be read back to check each delivery's HMAC (CONTRACT §9), so
-- the column holds the secret sealed with the platform's secrets key (registry.Cipher), base64,
-- not a hash of it. No row had one yet when this landed (issue 27's routes came with it).
ALTER TABLE automations RENAME COLUMN secret_hash TO event_secret;
-- A fire keeps what fired it and its event (an event trigger's body, a store trigger's record),
-- so that a fire whose queue task was lost between its record and its enqueue still runs with
-- them when the scheduler enqueues it again.
ALTER TABLE automation_fires ADD COLUMN trigger_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE automation_fires ADD COLUMN event TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE automation_fires DROP COLUMN event;
ALTER TABLE automation_fires DROP COLUMN trigger_kind;
ALTER TABLE automations RENAME COLUMN event_secret TO secret_hash;
