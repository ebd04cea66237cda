-- +goose Up
-- Runs: one row per finished chat turn on a deployment (spec 2.6: runs are filtered by the
-- metadata keys userId and screen). runner/sessions/dbstore writes the row in the transaction
-- that stores the turn's result on its session; the platform lists them (registry.Runs).
-- kind is chat or eval; reason is the done frame's reason (model_stop, max_turns, user_abort,
-- error, budget_exceeded) or interrupted for a turn whose process died or lost its lock, ended
-- by the next turn on its session or by a restart. user_id and auth_method are the verified
-- caller (svc.user.id, svc.auth.method); user_key and screen are the metadata keys userId and
-- screen, kept apart so that lists filter on them; metadata is the session's whole map as the
-- turn saw it. trace_id is the turn span's trace when it was traced. A run goes with its
-- session (DELETE /sessions/history/{id}).
CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL DEFAULT '',
    deploy_id     TEXT NOT NULL DEFAULT '',
    session_id    TEXT NOT NULL,
    kind          TEXT NOT NULL DEFAULT 'chat',
    reason        TEXT NOT NULL,
    provider      TEXT NOT NULL DEFAULT '',
    model         TEXT NOT NULL DEFAULT '',
    steps         INTEGER NOT NULL DEFAULT 0,
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cached_tokens BIGINT NOT NULL DEFAULT 0,
    trace_id      TEXT NOT NULL DEFAULT '',
    user_id       TEXT NOT NULL DEFAULT '',
    auth_method   TEXT NOT NULL DEFAULT '',
    user_key      TEXT NOT NULL DEFAULT '',
    screen        TEXT NOT NULL DEFAULT '',
    metadata      TEXT NOT NULL DEFAULT '{}',
    started_at    TIMESTAMPTZ NOT NULL,
    ended_at      TIMESTAMPTZ NOT NULL
);
-- The run lists of an agent, newest first: all of them, or by userId, screen or deployment.
CREATE INDEX runs_agent_started ON runs(agent_id, started_at DESC);
CREATE INDEX runs_agent_user_key_started ON runs(agent_id, user_key, started_at DESC);
CREATE INDEX runs_agent_screen_started ON runs(agent_id, screen, started_at DESC);
CREATE INDEX runs_deploy_started ON runs(deploy_id, started_at DESC);
-- A session's runs: listed by ?session=, deleted with the session.
CREATE INDEX runs_session ON runs(session_id);

-- +goose Down
DROP TABLE runs;
