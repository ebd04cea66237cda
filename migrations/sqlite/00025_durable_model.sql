-- +goose Up
-- model is the model the chat session that started a durable run chose ({"provider", "model",
-- "effort"} as JSON; NULL when it chose none): the specialists the run's handler asks
-- (ctx.callSubagent) run on it on every resume, as they do in an inline tool, instead of on the
-- agent's models.main. Never an API key or base URL.
ALTER TABLE durable_runs ADD COLUMN model TEXT;

-- +goose Down
ALTER TABLE durable_runs DROP COLUMN model;
