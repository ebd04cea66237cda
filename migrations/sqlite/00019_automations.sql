-- +goose Up
-- Automations (CONTRACT §9, issue 27): an agent's saved schedules and triggers, each in an owner
-- scope (a scope id, a user id, or '' for the agent level) and run with the authority of its saver
-- (JSON: user, scope, credential kind and id, re-checked at each fire). spec is the automation's
-- JSON document; secret_hash is the SHA-256 of an event trigger's secret, which is shown once.
-- The scheduler scans (enabled, next_fire_at). automation_fires holds one row per fire time: its
-- primary key is what makes a fire happen once however many workers claim it.
-- automation_events refuses a replayed event id.
CREATE TABLE automations (
    id              TEXT PRIMARY KEY,
    agent_id        TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    owner_scope     TEXT NOT NULL DEFAULT '',
    saver           TEXT NOT NULL DEFAULT '{}',
    name            TEXT NOT NULL,
    spec            TEXT NOT NULL,
    enabled         BOOLEAN NOT NULL DEFAULT 1,
    disabled_reason TEXT NOT NULL DEFAULT '',
    secret_hash     TEXT NOT NULL DEFAULT '',
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL,
    next_fire_at    DATETIME,
    last_fire_at    DATETIME
);
CREATE INDEX automations_owner ON automations (agent_id, owner_scope, created_at, id);
CREATE INDEX automations_due ON automations (enabled, next_fire_at);

CREATE TABLE automation_fires (
    automation_id TEXT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    fire_time     DATETIME NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL,
    done_reason   TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    fired_at      DATETIME NOT NULL,
    started_at    DATETIME,
    ended_at      DATETIME,
    PRIMARY KEY (automation_id, fire_time)
);

CREATE TABLE automation_events (
    automation_id TEXT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    event_id      TEXT NOT NULL,
    seen_at       DATETIME NOT NULL,
    PRIMARY KEY (automation_id, event_id)
);

-- +goose Down
DROP TABLE automation_events;
DROP TABLE automation_fires;
DROP TABLE automations;
