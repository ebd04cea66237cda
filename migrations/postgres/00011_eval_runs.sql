-- +goose Up
-- Runs of a deployment's evals (package evals): state queued, running, success, failure or error;
-- result is the runner's JSON (each eval, run and assertion).
CREATE TABLE eval_runs (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    deploy_id   TEXT NOT NULL,
    commit_sha  TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL DEFAULT 'queued',
    result      TEXT NOT NULL DEFAULT '{}',
    error       TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ
);
CREATE INDEX eval_runs_deploy_created ON eval_runs(deploy_id, created_at DESC);

-- +goose Down
DROP TABLE eval_runs;
