-- +goose Up
-- executions counts the executions of a durable run begun since it last waited at a pause (or
-- was created): a claim of a lapsed lease (an execution that stored no outcome in time) adds one,
-- an answer or a wake-up starts again at 1. The runtime fails a run whose executions keep
-- lapsing instead of resuming it forever.
ALTER TABLE durable_runs ADD COLUMN executions INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE durable_runs DROP COLUMN executions;
