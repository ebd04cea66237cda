-- +goose Up
-- Who may call an agent (CONTRACT §8): its sign-in settings (JSON, as PUT /api/agents/{id}/access
-- took them), the browser sessions they open (the cookie's value is never stored, only its
-- SHA-256), and when each API key was last used. The partial indexes serve the runners' poll of
-- what was revoked or ended lately.
CREATE TABLE agent_access (
    agent_id    TEXT PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    settings    TEXT NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE browser_sessions (
    id_hash     TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    email       TEXT NOT NULL DEFAULT '',
    email_verified BOOLEAN NOT NULL DEFAULT FALSE,
    org_id      TEXT NOT NULL DEFAULT '',
    group_names TEXT NOT NULL DEFAULT '[]',
    scope_id    TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    ended_at    TIMESTAMPTZ
);
CREATE INDEX browser_sessions_ended ON browser_sessions (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX browser_sessions_expires ON browser_sessions (expires_at);

ALTER TABLE api_keys ADD COLUMN last_used_at TIMESTAMPTZ;
CREATE INDEX api_keys_revoked ON api_keys (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX api_keys_agent ON api_keys (agent_id);

-- +goose Down
DROP INDEX api_keys_agent;
DROP INDEX api_keys_revoked;
ALTER TABLE api_keys DROP COLUMN last_used_at;
DROP TABLE browser_sessions;
DROP TABLE agent_access;
