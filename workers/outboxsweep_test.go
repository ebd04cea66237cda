package workers_test

import (
	"context"
	"encoding/json"
	"errors"
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

// failQueue refuses every task.
type failQueue struct{ recordQueue }

func (q *failQueue) Enqueue(context.Context, workers.Task, ...workers.Option) error {
	return errors.New("redis down")
}

// A delivery's pending turn is enqueued once, and stays pending when its enqueue fails, for
// the sweep, which takes it once it is stale.
func TestChannelTurns(t *testing.T) {
	ctx := context.Background()
	store := registry.NewChannels(dbtest.SQLite(t))
	turn := func(id string) (registry.DeliveryKey, []byte) {
		p, err := json.Marshal(workers.ChannelTurn{AgentID: "ag1", Channel: "slack", DeliveryID: id, Message: json.RawMessage(`{"text":"hi"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return registry.DeliveryKey{AgentID: "ag1", Channel: "slack", DeliveryID: id}, p
	}
	k1, p1 := turn("Ev1")
	k2, p2 := turn("Ev2")
	if _, err := store.SeeDeliveriesPending(ctx, []registry.DeliveryKey{k1, k2}, [][]byte{p1, p2}); err != nil {
		t.Fatal(err)
	}
	// Redis is down when the runner enqueues Ev2: it stays pending.
	down := &workers.ChannelTurns{Store: store, Queue: &failQueue{}}
	if n, err := down.Enqueue(ctx, []registry.PendingTurn{{DeliveryKey: k2, Turn: p2}}); err == nil || n != 0 {
		t.Fatalf("Enqueue with the queue down = %d, %v; want an error", n, err)
	}
	q := &recordQueue{}
	now := time.Now()
	c := &workers.ChannelTurns{Store: store, Queue: q, Stale: time.Minute, Now: func() time.Time { return now }}
	if n, err := c.Enqueue(ctx, []registry.PendingTurn{{DeliveryKey: k1, Turn: p1}}); err != nil || n != 1 {
		t.Fatalf("Enqueue = %d, %v", n, err)
	}
	if len(q.tasks) != 1 || q.tasks[0].Type != workers.TaskChannelTurn || string(q.tasks[0].Payload) != string(p1) ||
		q.tasks[0].ID != "channel:turn:ag1:slack:Ev1" || q.opts[0].MaxRetry == 0 {
		t.Fatalf("enqueued %+v with %+v; want the turn of Ev1, as EnqueueChannelTurn enqueues it", q.tasks, q.opts)
	}
	if n, err := c.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep within the window = %d, %v; want nothing", n, err)
	}
	now = now.Add(2 * time.Minute)
	if n, err := c.Sweep(ctx); err != nil || n != 1 || len(q.tasks) != 2 || q.tasks[1].ID != "channel:turn:ag1:slack:Ev2" {
		t.Fatalf("Sweep = %d, %v, tasks %+v; want the turn of Ev2", n, err, q.tasks)
	}
	if n, err := c.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want nothing left", n, err)
	}
}
