-- +goose Up
-- What a session's history holds, in bytes: the runtime bounds it per session and per agent.
ALTER TABLE sessions ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sessions DROP COLUMN stored_bytes;
