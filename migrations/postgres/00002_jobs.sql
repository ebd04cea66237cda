-- +goose Up
-- Jobs of the in-process queue of `svc up` (workers/dbqueue). The scale-out roles use asynq on
-- Redis instead and leave this table empty.
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    type         TEXT NOT NULL,
    payload      BYTEA NOT NULL,
    unique_key   TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_retry    INTEGER NOT NULL,
    run_at       TIMESTAMPTZ NOT NULL,
    lease_until  TIMESTAMPTZ,
    worker_id    TEXT NOT NULL DEFAULT '',
    last_error   TEXT NOT NULL DEFAULT '',
    timeout_ms   BIGINT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
-- Dedupe: one unfinished job per key, enforced by the database so it holds under races.
CREATE UNIQUE INDEX jobs_unique_key ON jobs(unique_key) WHERE state IN ('queued', 'running');
-- Claiming: the oldest due queued job, or a running job whose lease expired.
CREATE INDEX jobs_queued ON jobs(run_at) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs(lease_until) WHERE state = 'running';
-- Retention sweep of finished jobs.
CREATE INDEX jobs_finished ON jobs(updated_at) WHERE state IN ('done', 'failed');

-- +goose Down
DROP TABLE jobs;
