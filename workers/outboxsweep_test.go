package workers_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/workers"
)

// A reply whose sending was never enqueued is enqueued again once it is stale, its parts in
// order in one task, by one sweep; a sent entry is left alone, and so is any within the window.
func TestOutboxSweeper(t *testing.T) {
	ctx := context.Background()
	store := registry.NewChannels(dbtest.SQLite(t))
	entry := func(key string) registry.OutboxEntry {
		return registry.OutboxEntry{AgentID: "ag1", Channel: "slack", IdempotencyKey: key, Request: json.RawMessage(`{"method":"chat.postMessage"}`)}
	}
	lost, err := store.AddOutbox(ctx, []registry.OutboxEntry{entry("ag1:slack:Ev1:text:000"), entry("ag1:slack:Ev1:text:001"), entry("ag1:slack:Ev2:apr:c_1:000")})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.MarkSent(ctx, lost[2].ID); err != nil {
		t.Fatal(err)
	}
	q := &recordQueue{}
	now := time.Now()
	s := &workers.OutboxSweeper{Store: store, Queue: q, Stale: time.Minute, Now: func() time.Time { return now }}
	if n, err := s.Sweep(ctx); err != nil || n != 0 || len(q.tasks) != 0 {
		t.Fatalf("Sweep within the window = %d, %v, %d tasks; want nothing", n, err, len(q.tasks))
	}
	now = now.Add(2 * time.Minute)
	if n, err := s.Sweep(ctx); err != nil || n != 2 || len(q.tasks) != 1 {
		t.Fatalf("Sweep = %d, %v, %d tasks; want the 2 entries of the lost reply in one task", n, err, len(q.tasks))
	}
	var send workers.ChannelSend
	if err := json.Unmarshal(q.tasks[0].Payload, &send); err != nil || q.tasks[0].Type != workers.TaskChannelSend ||
		send.AgentID != "ag1" || send.Channel != "slack" || !slices.Equal(send.Outbox, []string{lost[0].ID, lost[1].ID}) {
		t.Fatalf("task %+v (%+v, %v), want the send of %s, %s in order", q.tasks[0], send, err, lost[0].ID, lost[1].ID)
	}
	// Requeued from now: a second sweep (or another worker's) finds nothing until it is stale again.
	now = time.Now()
	if n, err := s.Sweep(ctx); err != nil || n != 0 || len(q.tasks) != 1 {
		t.Errorf("second Sweep = %d, %v, %d tasks; want nothing more", n, err, len(q.tasks))
	}
}
