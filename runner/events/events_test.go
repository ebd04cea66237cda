package events_test

import (
	"context"
	"testing"
	"time"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/runner/events"
	"svc/runner/sse"
)

// An event published by one process reaches the subscribers of its agent in every process that
// shares Redis, and no one else's; without Redis it reaches this process's.
func TestBus(t *testing.T) {
	ctx := context.Background()
	agent := auth.NewID("ag_") // the Redis channel is shared by every test: an agent of its own
	run := func(t *testing.T, a, b *events.Bus) {
		gotA, gotB, other := make(chan sse.Frame, 4), make(chan sse.Frame, 4), make(chan sse.Frame, 4)
		defer a.Subscribe(agent, func(f sse.Frame) { gotA <- f })()
		defer b.Subscribe(agent, func(f sse.Frame) { gotB <- f })()
		defer b.Subscribe("ag_other", func(f sse.Frame) { other <- f })()
		f := &sse.Frame{Type: sse.TypeSessionUpdated, SessionID: "dur_1", Status: "running", ToolName: "refund"}
		if err := a.Publish(ctx, agent, f); err != nil {
			t.Fatal(err)
		}
		for name, ch := range map[string]chan sse.Frame{"publisher": gotA, "other process": gotB} {
			select {
			case g := <-ch:
				if g.Type != f.Type || g.SessionID != "dur_1" || g.Status != "running" || g.ToolName != "refund" {
					t.Errorf("%s got %+v", name, g)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the %s got nothing", name)
			}
		}
		select {
		case g := <-other:
			t.Errorf("another agent's subscriber got %+v", g)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Run("redis", func(t *testing.T) {
		rdb := dbtest.Redis(t)
		a, err := events.New(ctx, rdb, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := events.New(ctx, rdb, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		run(t, a, b)
	})
	t.Run("memory", func(t *testing.T) {
		a, err := events.New(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		run(t, a, a)
	})
}
