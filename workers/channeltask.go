package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The task types of the messaging channels: the turns of the deliveries acknowledged together
// (one task for a batch, recorded with the batch, which enqueues a task of each turn once the
// acknowledgements are out), the turn of a message a channel delivered, and the sending of the
// outbox entries of its replies (one task per batch, sent in order, so that the parts of an
// answer arrive in their order; a failed entry holds back those after it).
const (
	TaskChannelTurns = "channel:turns"
	TaskChannelTurn  = "channel:turn"
	TaskChannelSend  = "channel:send"
)

// channelTurnRetries is how often a channel turn is tried again: a message whose thread's session
// runs another turn waits for it, up to the queue's backoff cap (a minute) each time.
const channelTurnRetries = 30

// ChannelTurn is the payload of TaskChannelTurn.
type ChannelTurn struct {
	AgentID    string `json:"agentId"`
	Channel    string `json:"channel"`
	DeliveryID string `json:"deliveryId"`
	// Message is the parsed channels.Message, as JSON.
	Message json.RawMessage `json:"message"`
}

// ChannelTurns is the payload of TaskChannelTurns.
type ChannelTurns struct {
	Turns []ChannelTurn `json:"turns"`
}

// ChannelSend is the payload of TaskChannelSend: outbox entries to send in order, not before At.
type ChannelSend struct {
	AgentID string    `json:"agentId"`
	Channel string    `json:"channel"`
	Outbox  []string  `json:"outbox"`
	At      time.Time `json:"at"`
}

// ChannelTurnTask is the task of the turn of a delivery and its options, as EnqueueChannelTurn
// enqueues it: for a queue that enqueues otherwise (in a transaction of its database).
func ChannelTurnTask(t ChannelTurn) (Task, []Option, error) {
	p, err := json.Marshal(t)
	if err != nil {
		return Task{}, nil, fmt.Errorf("encode channel turn: %w", err)
	}
	id := "channel:turn:" + t.AgentID + ":" + t.Channel + ":" + t.DeliveryID
	return Task{Type: TaskChannelTurn, Payload: p, ID: id}, []Option{MaxRetry(channelTurnRetries)}, nil
}

// ChannelTurnsTask is the task of the turns of a batch of deliveries and its options: a batch's
// turns are one row or call of the queue while the batch is acknowledged, not one per delivery.
// A task of its own: its handler (ChannelHandler.Turns) enqueues each turn with EnqueueChannelTurns.
func ChannelTurnsTask(ts []ChannelTurn) (Task, []Option, error) {
	if len(ts) == 0 {
		return Task{}, nil, fmt.Errorf("%w: a channel:turns task without turns", ErrBadTask)
	}
	p, err := json.Marshal(ChannelTurns{Turns: ts})
	if err != nil {
		return Task{}, nil, fmt.Errorf("encode channel turns: %w", err)
	}
	return Task{Type: TaskChannelTurns, Payload: p}, []Option{MaxRetry(channelTurnRetries)}, nil
}

// EnqueueChannelTurns enqueues the turn of each of ts, leaving out those pending or running. A
// turn enqueued again after it ended finds its answer in the outbox and sends nothing twice, so
// a channel:turns task that runs again (its worker died) loses and repeats nothing.
func EnqueueChannelTurns(ctx context.Context, q Queue, ts []ChannelTurn) error {
	tasks := make([]Task, len(ts))
	var opts []Option
	for i, t := range ts {
		var err error
		if tasks[i], opts, err = ChannelTurnTask(t); err != nil {
			return err
		}
	}
	return EnqueueAll(ctx, q, tasks, opts...)
}

// EnqueueChannelTurn enqueues the turn of a delivery, once while it is pending or running.
func EnqueueChannelTurn(ctx context.Context, q Queue, t ChannelTurn) error {
	task, opts, err := ChannelTurnTask(t)
	if err != nil {
		return err
	}
	err = q.Enqueue(ctx, task, opts...)
	if errors.Is(err, ErrDuplicate) {
		return nil
	}
	return err
}

// EnqueueChannelSend enqueues the sending of s at s.At.
func EnqueueChannelSend(ctx context.Context, q Queue, s ChannelSend) error {
	if len(s.Outbox) == 0 {
		return nil
	}
	p, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode channel send: %w", err)
	}
	id := "channel:send:" + s.Outbox[0] + ":" + strconv.FormatInt(s.At.UnixMilli(), 10)
	err = q.Enqueue(ctx, Task{Type: TaskChannelSend, Payload: p, ID: id}, ProcessAt(s.At), MaxRetry(10), Timeout(5*time.Minute))
	if errors.Is(err, ErrDuplicate) {
		return nil
	}
	return err
}

// ChannelHandler is the handler of TaskChannelTurns, TaskChannelTurn and TaskChannelSend:
// Turns enqueues the turns of a batch, Turn and Send do the work on the runtime of the agent's
// active deployment.
type ChannelHandler struct {
	Turns func(ctx context.Context, ts []ChannelTurn) error
	Turn  func(ctx context.Context, t ChannelTurn) error
	Send  func(ctx context.Context, s ChannelSend) error
}

// ProcessTask implements Handler.
func (h *ChannelHandler) ProcessTask(ctx context.Context, t Task) error {
	switch t.Type {
	case TaskChannelTurns:
		var ct ChannelTurns
		if err := json.Unmarshal(t.Payload, &ct); err != nil {
			return fmt.Errorf("%w: channel turns payload of %d bytes is unreadable: %v", ErrSkipRetry, len(t.Payload), err)
		}
		if len(ct.Turns) == 0 {
			return fmt.Errorf("%w: channel turns payload without turns", ErrSkipRetry)
		}
		return h.Turns(ctx, ct.Turns)
	case TaskChannelTurn:
		var ct ChannelTurn
		if err := json.Unmarshal(t.Payload, &ct); err != nil || ct.AgentID == "" {
			return fmt.Errorf("%w: channel turn payload %q is unreadable", ErrSkipRetry, t.Payload)
		}
		return h.Turn(ctx, ct)
	case TaskChannelSend:
		var cs ChannelSend
		if err := json.Unmarshal(t.Payload, &cs); err != nil || cs.AgentID == "" {
			return fmt.Errorf("%w: channel send payload %q is unreadable", ErrSkipRetry, t.Payload)
		}
		return h.Send(ctx, cs)
	}
	return fmt.Errorf("%w: %s", ErrNoHandler, t.Type)
}
