-- +goose Up
-- Why a runner could not load a deployment's bundle, so that the API and `svc status` say so;
-- cleared when a runner loads it again.
ALTER TABLE deployments ADD COLUMN runtime_error TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments ADD COLUMN runtime_error_at DATETIME;

-- +goose Down
ALTER TABLE deployments DROP COLUMN runtime_error_at;
ALTER TABLE deployments DROP COLUMN runtime_error;
