package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"svc/workers"
)

// recordQueue records what is enqueued, refusing a second task of a pending ID.
type recordQueue struct {
	tasks []workers.Task
	opts  []workers.Options
}

func (q *recordQueue) Enqueue(_ context.Context, t workers.Task, opts ...workers.Option) error {
	for _, have := range q.tasks {
		if have.ID == t.ID {
			return workers.ErrDuplicate
		}
	}
	var o workers.Options
	for _, opt := range opts {
		opt(&o)
	}
	q.tasks, q.opts = append(q.tasks, t), append(q.opts, o)
	return nil
}

func (q *recordQueue) Run(context.Context, *workers.ServeMux) error { return nil }

// A delivery's turn is enqueued once; a send waits for its time; the handler gets the payloads.
func TestChannelTasks(t *testing.T) {
	q := &recordQueue{}
	ctx := context.Background()
	turn := workers.ChannelTurn{AgentID: "ag1", Channel: "slack", DeliveryID: "Ev1", Message: json.RawMessage(`{"text":"hi"}`)}
	for range 2 {
		if err := workers.EnqueueChannelTurn(ctx, q, turn); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	send := workers.ChannelSend{AgentID: "ag1", Channel: "slack", Outbox: []string{"obx1", "obx2"}, At: at}
	if err := workers.EnqueueChannelSend(ctx, q, send); err != nil {
		t.Fatal(err)
	}
	if len(q.tasks) != 2 || q.tasks[0].Type != workers.TaskChannelTurn || q.tasks[1].Type != workers.TaskChannelSend || !q.opts[1].ProcessAt.Equal(at) {
		t.Fatalf("enqueued %+v with %+v; want the turn once, then the send at its time", q.tasks, q.opts)
	}
	var gotTurn workers.ChannelTurn
	var gotSend workers.ChannelSend
	h := &workers.ChannelHandler{
		Turn: func(_ context.Context, ct workers.ChannelTurn) error { gotTurn = ct; return nil },
		Send: func(_ context.Context, cs workers.ChannelSend) error { gotSend = cs; return nil },
	}
	for _, task := range q.tasks {
		if err := h.ProcessTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	if gotTurn.DeliveryID != "Ev1" || string(gotTurn.Message) != `{"text":"hi"}` || len(gotSend.Outbox) != 2 || !gotSend.At.Equal(at) {
		t.Errorf("handled %+v and %+v", gotTurn, gotSend)
	}
	if err := h.ProcessTask(ctx, workers.Task{Type: workers.TaskChannelTurn, Payload: []byte("{")}); !errors.Is(err, workers.ErrSkipRetry) {
		t.Errorf("unreadable payload: %v, want ErrSkipRetry", err)
	}
}
