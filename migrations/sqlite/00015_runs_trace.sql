-- +goose Up
-- POST /feedback with a trace_id checks that a turn of the agent had that trace (a run's
-- trace_id) before it keeps the rating: one index lookup by (agent, trace). Only traced turns
-- have one, so the index leaves the others out.
CREATE INDEX runs_agent_trace ON runs(agent_id, trace_id) WHERE trace_id <> '';

-- +goose Down
DROP INDEX runs_agent_trace;
