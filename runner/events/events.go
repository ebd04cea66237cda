// Package events carries the runtime's bus events (session_updated, spec 6.2) to every runtime
// of an agent, in this process and, through Redis pub/sub, in the other runner processes that
// share it: an answer taken by one runner reaches the GET /api/events subscribers of all.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"

	"svc/runner/sse"
)

// channel is the Redis pub/sub channel of every agent's events.
const channel = "svc:events"

// message is one event on the channel.
type message struct {
	AgentID string    `json:"agent_id"`
	Frame   sse.Frame `json:"frame"`
}

// Bus delivers an agent's events to the subscribers of that agent. The zero value is not
// usable: make one with New. It is safe for concurrent use; Close ends its Redis subscription.
type Bus struct {
	rdb  redis.UniversalClient
	log  *slog.Logger
	mu   sync.Mutex
	subs map[string]map[*func(sse.Frame)]struct{}
	sub  *redis.PubSub
	done chan struct{}
	wg   sync.WaitGroup
}

// New returns a Bus; with rdb it carries events between the processes sharing rdb, without it
// only within this process.
func New(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) (*Bus, error) {
	if log == nil {
		log = slog.Default()
	}
	b := &Bus{rdb: rdb, log: log, subs: map[string]map[*func(sse.Frame)]struct{}{}, done: make(chan struct{})}
	if rdb == nil {
		return b, nil
	}
	b.sub = rdb.Subscribe(ctx, channel)
	if _, err := b.sub.Receive(ctx); err != nil { // the subscription's confirmation
		_ = b.sub.Close()
		return nil, err
	}
	b.wg.Add(1)
	go b.listen()
	return b, nil
}

// Subscribe calls fn with every event of agentID until cancel is called. fn must not block.
func (b *Bus) Subscribe(agentID string, fn func(sse.Frame)) (cancel func()) {
	key := &fn
	b.mu.Lock()
	if b.subs[agentID] == nil {
		b.subs[agentID] = map[*func(sse.Frame)]struct{}{}
	}
	b.subs[agentID][key] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.subs[agentID], key)
		if len(b.subs[agentID]) == 0 {
			delete(b.subs, agentID)
		}
		b.mu.Unlock()
	}
}

// Publish delivers f to the subscribers of agentID in every process. Without Redis it delivers
// in this process; with Redis it delivers through Redis (this process's subscribers included),
// and in this process directly when Redis fails.
func (b *Bus) Publish(ctx context.Context, agentID string, f *sse.Frame) error {
	if b.rdb == nil {
		b.deliver(agentID, *f)
		return nil
	}
	payload, err := json.Marshal(message{AgentID: agentID, Frame: *f})
	if err != nil {
		return err
	}
	if err := b.rdb.Publish(ctx, channel, payload).Err(); err != nil {
		b.deliver(agentID, *f)
		return err
	}
	return nil
}

func (b *Bus) deliver(agentID string, f sse.Frame) {
	b.mu.Lock()
	fns := make([]func(sse.Frame), 0, len(b.subs[agentID]))
	for fn := range b.subs[agentID] {
		fns = append(fns, *fn)
	}
	b.mu.Unlock()
	for _, fn := range fns {
		fn(f)
	}
}

func (b *Bus) listen() {
	defer b.wg.Done()
	ch := b.sub.Channel()
	for {
		select {
		case <-b.done:
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			var msg message
			if err := json.Unmarshal([]byte(m.Payload), &msg); err != nil {
				b.log.Warn("events: unreadable message", "err", err)
				continue
			}
			b.deliver(msg.AgentID, msg.Frame)
		}
	}
}

// Close ends the Redis subscription and waits for its reader.
func (b *Bus) Close() error {
	select {
	case <-b.done:
		return nil
	default:
	}
	close(b.done)
	var err error
	if b.sub != nil {
		err = b.sub.Close()
	}
	b.wg.Wait()
	if errors.Is(err, redis.ErrClosed) {
		err = nil
	}
	return err
}
