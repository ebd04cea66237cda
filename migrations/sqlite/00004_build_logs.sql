-- +goose Up
CREATE TABLE build_logs (
    build_id    TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    step        TEXT NOT NULL DEFAULT '',
    line        TEXT NOT NULL,
    created_at  DATETIME NOT NULL,
    PRIMARY KEY (build_id, seq)
);

-- +goose Down
DROP TABLE build_logs;
