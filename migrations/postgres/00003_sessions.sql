-- +goose Up
-- Chat sessions of the runtime (runner/sessions/dbstore). agent_id is the platform agent the
-- session belongs to ('' under svc dev); agent is the named agent under agents/.
CREATE TABLE sessions (
    id                  TEXT PRIMARY KEY,
    agent_id            TEXT NOT NULL DEFAULT '',
    owner               TEXT NOT NULL DEFAULT '',
    scope_id            TEXT NOT NULL DEFAULT '',
    agent               TEXT NOT NULL DEFAULT '',
    skill               TEXT NOT NULL DEFAULT '',
    deploy_id           TEXT NOT NULL DEFAULT '',
    model               TEXT NOT NULL DEFAULT '{}',
    max_session_tokens  BIGINT NOT NULL DEFAULT 0,
    tokens_used         BIGINT NOT NULL DEFAULT 0,
    input_tokens        BIGINT NOT NULL DEFAULT 0,
    output_tokens       BIGINT NOT NULL DEFAULT 0,
    cached_tokens       BIGINT NOT NULL DEFAULT 0,
    title               TEXT NOT NULL DEFAULT '',
    status              TEXT NOT NULL DEFAULT 'idle',
    metadata            TEXT NOT NULL DEFAULT '{}',
    context             TEXT NOT NULL DEFAULT '{}',
    state               TEXT NOT NULL DEFAULT '{}',
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL
);
-- History lists: newest first, per agent, optionally per scope.
CREATE INDEX sessions_agent_updated ON sessions(agent_id, updated_at DESC);
CREATE INDEX sessions_agent_scope_updated ON sessions(agent_id, scope_id, updated_at DESC);

CREATE TABLE session_messages (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    role        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- +goose Down
DROP TABLE session_messages;
DROP TABLE sessions;
