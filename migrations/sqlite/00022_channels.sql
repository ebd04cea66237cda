-- +goose Up
-- The messaging channels (docs/channels.md). channel_deliveries refuses a delivery seen in the
-- last 24 hours (Slack's retries, Telegram's redeliveries), whichever runner it reaches; rows
-- older than that are pruned. channel_outbox holds every call of a platform's API a reply needs,
-- stored before it is sent, so that a reply survives the death of any process and is sent once:
-- idempotency_key names the call across re-runs of the turn that made it.
CREATE TABLE channel_deliveries (
    agent_id    TEXT NOT NULL,
    channel     TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    seen_at     DATETIME NOT NULL,
    PRIMARY KEY (agent_id, channel, delivery_id)
);
CREATE INDEX channel_deliveries_seen ON channel_deliveries(seen_at);

CREATE TABLE channel_outbox (
    id              TEXT PRIMARY KEY,
    agent_id        TEXT NOT NULL,
    channel         TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    request         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at DATETIME NOT NULL,
    last_error      TEXT NOT NULL DEFAULT '',
    created_at      DATETIME NOT NULL
);
CREATE INDEX channel_outbox_pending ON channel_outbox(status, next_attempt_at);

-- +goose Down
DROP TABLE channel_outbox;
DROP TABLE channel_deliveries;
