-- +goose Up
-- turn is the payload of a delivery's turn while it waits to be enqueued on a queue outside the
-- database (Redis): such a delivery is acknowledged once it is recorded with its turn, the turn
-- is enqueued after the acknowledgements, and a sweep enqueues the turns of those whose process
-- died first. NULL once enqueued, and always with the embedded queue (which enqueues a turn in
-- its delivery's commit).
ALTER TABLE channel_deliveries ADD COLUMN turn TEXT;
CREATE INDEX channel_deliveries_pending ON channel_deliveries(seen_at) WHERE turn IS NOT NULL;

-- +goose Down
DROP INDEX channel_deliveries_pending;
ALTER TABLE channel_deliveries DROP COLUMN turn;
