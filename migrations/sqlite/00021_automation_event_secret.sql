-- +goose Up
-- An event trigger's secret must be read back to check each delivery's HMAC (CONTRACT §9), so
-- the column holds the secret sealed with the platform's secrets key (registry.Cipher), base64,
-- not a hash of it. No row had one yet when this landed (issue 27's routes came with it).
ALTER TABLE automations RENAME COLUMN secret_hash TO event_secret;

-- +goose Down
ALTER TABLE automations RENAME COLUMN event_secret TO secret_hash;
