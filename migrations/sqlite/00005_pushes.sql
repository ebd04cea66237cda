-- +goose Up
CREATE TABLE pushes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    branch      TEXT NOT NULL,
    commit_sha  TEXT NOT NULL,
    pusher      TEXT NOT NULL DEFAULT '',
    message     TEXT NOT NULL DEFAULT '',
    created_at  DATETIME NOT NULL
);
CREATE INDEX pushes_agent ON pushes(agent_id, id);

-- +goose Down
DROP TABLE pushes;
