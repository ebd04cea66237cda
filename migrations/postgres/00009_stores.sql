-- +goose Up
-- Records of agents' stores (runner/stores). store_records holds the current version of each
-- key, store_versions the earlier ones (at most the store's history.versions). agent_id keeps
-- the agents that share a database apart; session_id and tool_call_id trace a write on stores
-- with "trace": true. The same SQL is the platform database's migration 00009 and the first
-- migration runner/stores runs on a database of the agent's own (svc.json "stores.url"),
-- hence IF NOT EXISTS: that database may be the platform's.
CREATE TABLE IF NOT EXISTS store_records (
    agent_id      TEXT NOT NULL,
    store         TEXT NOT NULL,
    record_key    TEXT COLLATE "C" NOT NULL,
    version       BIGINT NOT NULL,
    value         JSONB NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    tool_call_id  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (agent_id, store, record_key)
);
-- Queries and the store routes' lists: newest first, then by key in byte order (COLLATE "C",
-- as SQLite and Go compare), so that every backend lists ties alike.
CREATE INDEX IF NOT EXISTS store_records_newest ON store_records(agent_id, store, updated_at DESC, record_key);

CREATE TABLE IF NOT EXISTS store_versions (
    agent_id      TEXT NOT NULL,
    store         TEXT NOT NULL,
    record_key    TEXT COLLATE "C" NOT NULL,
    version       BIGINT NOT NULL,
    value         JSONB NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    tool_call_id  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (agent_id, store, record_key, version)
);

-- +goose Down
DROP TABLE IF EXISTS store_versions;
DROP TABLE IF EXISTS store_records;
