-- +goose Up
-- The questions a channel asked with buttons (ask_user's ask_choice, docs/channels.md): a button
-- carries the option's index (Telegram's callback data holds 64 bytes), and the turn its press
-- starts says the option's value, read here. Rows older than 30 days are pruned.
CREATE TABLE channel_questions (
    agent_id   TEXT NOT NULL,
    ask_id     TEXT NOT NULL,
    options    TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (agent_id, ask_id)
);
CREATE INDEX channel_questions_created ON channel_questions(created_at);

-- +goose Down
DROP TABLE channel_questions;
