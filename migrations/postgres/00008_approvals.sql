-- +goose Up
-- Approvals of tool calls that wait for the user (runner/approvals): a chat's turn waits on one
-- while its answer may arrive at any runtime of the agent. status: pending, approved, denied,
-- expired (no answer in time) or cancelled (the turn ended first).
CREATE TABLE approvals (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL DEFAULT '',
    session_id  TEXT NOT NULL,
    tool_name   TEXT NOT NULL,
    tool_id     TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending',
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    decided_at  TIMESTAMPTZ
);
CREATE INDEX approvals_session ON approvals(session_id);

-- +goose Down
DROP TABLE approvals;
