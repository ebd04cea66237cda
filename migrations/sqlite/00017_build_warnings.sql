-- +goose Up
-- What a build found that does not fail it (the agent's env: references that are not set), as
-- a JSON array of lines: the build status shows them and svc deploy prints them.
ALTER TABLE builds ADD COLUMN warnings TEXT NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE builds DROP COLUMN warnings;
