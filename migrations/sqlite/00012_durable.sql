-- +goose Up
-- Durable tool runs (runner/durable): a run is its own session that may wait for input, an
-- approval or a time for as long as it takes, and resumes on any runtime of the agent by replaying
-- its journal. status: running, awaiting-input, sleeping, completed, failed or cancelled.
-- attempt counts the claims of the run and lease_until is when a running run's executor counts
-- as dead; pause is the JSON of the pause a parked run waits at, and pause_key its key, so that
-- an answer can be made conditional on it in SQL. JSON columns are TEXT (JSON, not JSONB, on
-- Postgres), so that a run's input, result and journal come back byte for byte as written.
CREATE TABLE durable_runs (
    id                TEXT PRIMARY KEY,
    agent_id          TEXT NOT NULL DEFAULT '',
    deploy_id         TEXT NOT NULL DEFAULT '',
    tool_name         TEXT NOT NULL,
    parent_session_id TEXT NOT NULL DEFAULT '',
    owner             TEXT NOT NULL DEFAULT '',
    scope_id          TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL,
    input             TEXT,
    context           TEXT,
    pause             TEXT,
    pause_key         TEXT,
    answered_by       TEXT NOT NULL DEFAULT '',
    result            TEXT,
    error             TEXT NOT NULL DEFAULT '',
    attempt           INTEGER NOT NULL DEFAULT 0,
    lease_until       DATETIME,
    created_at        DATETIME NOT NULL,
    updated_at        DATETIME NOT NULL
);
-- The run lists of an agent, by status, newest first.
CREATE INDEX durable_runs_agent_status_created ON durable_runs(agent_id, status, created_at DESC);
-- The runs a chat session started.
CREATE INDEX durable_runs_parent_session ON durable_runs(parent_session_id);

-- The journal of a run: one entry per journaled call, under a key unique in the run; seq orders
-- the entries (concurrent recordings may share one, the time and key then order them).
CREATE TABLE durable_journal (
    run_id TEXT NOT NULL REFERENCES durable_runs(id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    value  TEXT,
    at     DATETIME NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX durable_journal_run_seq ON durable_journal(run_id, seq);

-- +goose Down
DROP TABLE durable_journal;
DROP TABLE durable_runs;
