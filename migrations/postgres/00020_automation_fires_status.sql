-- +goose Up
-- The scheduler looks, every tick, for fires still queued a while after they were claimed (their
-- task was lost between the claim and the enqueue); automation_fires keeps every fire ever made,
-- so that scan needs an index over the few queued ones. The running ones of one automation (the
-- overlap check) are found through the primary key.
CREATE INDEX automation_fires_queued ON automation_fires (fired_at) WHERE status = 'queued';

-- +goose Down
DROP INDEX automation_fires_queued;
