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

// A batch's turns are one task; its handler enqueues each turn, and running it again (its
// worker died after the enqueue) leaves out those pending.
func TestChannelTurnsTask(t *testing.T) {
	ctx := context.Background()
	turns := []workers.ChannelTurn{
		{AgentID: "ag1", Channel: "slack", DeliveryID: "Ev1", Message: json.RawMessage(`{"text":"a"}`)},
		{AgentID: "ag1", Channel: "slack", DeliveryID: "Ev2", Message: json.RawMessage(`{"text":"b"}`)},
	}
	if _, _, err := workers.ChannelTurnsTask(nil); !errors.Is(err, workers.ErrBadTask) {
		t.Errorf("no turns: %v, want ErrBadTask", err)
	}
	task, _, err := workers.ChannelTurnsTask(turns)
	if err != nil || task.Type != workers.TaskChannelTurns {
		t.Fatalf("ChannelTurnsTask = %+v, %v", task, err)
	}
	q := &recordQueue{}
	h := &workers.ChannelHandler{Turns: func(ctx context.Context, ts []workers.ChannelTurn) error {
		return workers.EnqueueChannelTurns(ctx, q, ts)
	}}
	for range 2 {
		if err := h.ProcessTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	if len(q.tasks) != 2 || q.tasks[0].Type != workers.TaskChannelTurn || q.tasks[1].ID != "channel:turn:ag1:slack:Ev2" || q.opts[0].MaxRetry == 0 {
		t.Fatalf("enqueued %+v with %+v; want each turn once, retried", q.tasks, q.opts)
	}
	for _, bad := range []string{"{", `{"turns":[]}`} {
		if err := h.ProcessTask(ctx, workers.Task{Type: workers.TaskChannelTurns, Payload: []byte(bad)}); !errors.Is(err, workers.ErrSkipRetry) {
			t.Errorf("payload %s: %v, want ErrSkipRetry", bad, err)
		}
	}
}
