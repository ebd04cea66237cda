-- +goose Up
CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    slug        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    created_at  DATETIME NOT NULL,
    updated_at  DATETIME NOT NULL
);

CREATE TABLE sources (
    agent_id        TEXT PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    type            TEXT NOT NULL,
    url             TEXT NOT NULL DEFAULT '',
    normalized_url  TEXT NOT NULL DEFAULT '',
    default_branch  TEXT NOT NULL DEFAULT '',
    webhook_secret  BLOB,
    credentials     TEXT NOT NULL DEFAULT '',
    updated_at      DATETIME NOT NULL
);
CREATE INDEX sources_normalized_url ON sources(normalized_url);

CREATE TABLE source_versions (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    digest      TEXT NOT NULL,
    object_key  TEXT NOT NULL,
    size        BIGINT NOT NULL,
    created_by  TEXT NOT NULL DEFAULT '',
    created_at  DATETIME NOT NULL
);
CREATE INDEX source_versions_agent ON source_versions(agent_id, created_at);

CREATE TABLE deploy_settings (
    agent_id                 TEXT PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    production_branch        TEXT NOT NULL DEFAULT '',
    auto_deploy              BOOLEAN NOT NULL DEFAULT 0,
    auto_promote_production  BOOLEAN NOT NULL DEFAULT 0,
    updated_at               DATETIME NOT NULL
);

CREATE TABLE builds (
    id                 TEXT PRIMARY KEY,
    agent_id           TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    deploy_id          TEXT NOT NULL,
    environment        TEXT NOT NULL,
    branch             TEXT NOT NULL DEFAULT '',
    commit_sha         TEXT NOT NULL DEFAULT '',
    source_version_id  TEXT NOT NULL DEFAULT '',
    trigger            TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL,
    error              TEXT NOT NULL DEFAULT '',
    steps              TEXT NOT NULL DEFAULT '[]',
    attempts           INTEGER NOT NULL DEFAULT 0,
    created_at         DATETIME NOT NULL,
    started_at         DATETIME,
    finished_at        DATETIME
);
CREATE INDEX builds_agent_env ON builds(agent_id, environment, created_at);

CREATE TABLE deployments (
    id                 TEXT PRIMARY KEY,
    agent_id           TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    build_id           TEXT NOT NULL,
    environment        TEXT NOT NULL,
    branch             TEXT NOT NULL DEFAULT '',
    commit_sha         TEXT NOT NULL DEFAULT '',
    source_version_id  TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL,
    is_active          BOOLEAN NOT NULL DEFAULT 0,
    bundle_key         TEXT NOT NULL DEFAULT '',
    digest             TEXT NOT NULL DEFAULT '',
    promoted_from      TEXT NOT NULL DEFAULT '',
    runtime_stopped    BOOLEAN NOT NULL DEFAULT 0,
    error              TEXT NOT NULL DEFAULT '',
    created_at         DATETIME NOT NULL,
    ready_at           DATETIME,
    activated_at       DATETIME
);
CREATE INDEX deployments_agent_env ON deployments(agent_id, environment, created_at);
CREATE UNIQUE INDEX deployments_one_active ON deployments(agent_id, environment) WHERE is_active = 1;

CREATE TABLE activations (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id        TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    environment     TEXT NOT NULL,
    action          TEXT NOT NULL,
    from_deploy_id  TEXT NOT NULL DEFAULT '',
    to_deploy_id    TEXT NOT NULL,
    actor           TEXT NOT NULL DEFAULT '',
    created_at      DATETIME NOT NULL
);
CREATE INDEX activations_agent ON activations(agent_id, created_at);

CREATE TABLE tokens (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    agent_id      TEXT NOT NULL DEFAULT '',
    hash          TEXT NOT NULL UNIQUE,
    created_at    DATETIME NOT NULL,
    revoked_at    DATETIME
);

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    created_at  DATETIME NOT NULL,
    revoked_at  DATETIME
);

CREATE TABLE secrets (
    agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    ciphertext  BLOB NOT NULL,
    updated_at  DATETIME NOT NULL,
    PRIMARY KEY (agent_id, name)
);

CREATE TABLE commit_statuses (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id     TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    commit_sha   TEXT NOT NULL,
    context      TEXT NOT NULL,
    state        TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    created_at   DATETIME NOT NULL
);
CREATE INDEX commit_statuses_lookup ON commit_statuses(agent_id, commit_sha, context, id);

-- +goose Down
DROP TABLE commit_statuses;
DROP TABLE secrets;
DROP TABLE api_keys;
DROP TABLE tokens;
DROP TABLE activations;
DROP TABLE deployments;
DROP TABLE builds;
DROP TABLE deploy_settings;
DROP TABLE source_versions;
DROP TABLE sources;
DROP TABLE agents;
