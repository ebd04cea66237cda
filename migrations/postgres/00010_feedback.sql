-- +goose Up
-- Feedback on chat turns (POST /feedback of the runtime): a rating and a comment, with the
-- session's metadata when it was given; user_key and screen are the metadata keys userId and
-- screen (spec 2.6), kept apart so that lists filter on them.
CREATE TABLE feedback (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL DEFAULT '',
    session_id  TEXT NOT NULL DEFAULT '',
    trace_id    TEXT NOT NULL DEFAULT '',
    rating      TEXT NOT NULL,
    comment     TEXT NOT NULL DEFAULT '',
    metadata    TEXT NOT NULL DEFAULT '{}',
    user_id     TEXT NOT NULL DEFAULT '',
    user_key    TEXT NOT NULL DEFAULT '',
    screen      TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX feedback_agent_created ON feedback(agent_id, created_at DESC);

-- +goose Down
DROP TABLE feedback;
