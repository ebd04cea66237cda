package runtime

import (
	"context"
	"sync"
	"time"

	"svc/registry"
	"svc/runner/channels"
)

// Delivery is a message an agent's channel accepted: to be recorded (deduplicated) and its
// turn enqueued.
type Delivery struct {
	AgentID string
	Message *channels.Message
}

// Recorded is what Channels.Record did with a delivery.
type Recorded int

// What Channels.Record did with a delivery.
const (
	// RecordedNew is a delivery recorded now whose turn is left to enqueue (Channels.Turn).
	RecordedNew Recorded = iota
	// RecordedQueued is a delivery recorded now with its turn enqueued in the same commit.
	RecordedQueued
	// RecordedDuplicate is a delivery recorded before: nothing is to be done.
	RecordedDuplicate
)

// maxIntakeBatch bounds the deliveries recorded in one commit.
const maxIntakeBatch = 256

// recordTimeout bounds the commit of a batch of deliveries: it serves many requests, so none
// of their contexts ends it.
const recordTimeout = 30 * time.Second

// intakeBatcher records concurrent deliveries together (group commit): a delivery that comes
// while a batch is being recorded waits for the next batch, which takes every delivery that
// came meanwhile; a delivery that comes alone is recorded at once, with no timer.
type intakeBatcher struct {
	record func(ctx context.Context, ds []Delivery) ([]Recorded, error)

	mu      sync.Mutex
	pending []*intakeCall
	running bool // a goroutine records batches until pending is empty
}

// intakeCall is a delivery waiting for its batch.
type intakeCall struct {
	d    Delivery
	res  Recorded
	err  error
	done chan struct{}
}

// do records d with whatever deliveries come at the same time, and says what was done with it.
func (b *intakeBatcher) do(d Delivery) (Recorded, error) {
	call := &intakeCall{d: d, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, call)
	if !b.running {
		b.running = true
		go b.loop()
	}
	b.mu.Unlock()
	<-call.done
	return call.res, call.err
}

// loop records the pending deliveries, a batch at a time, until none is left.
func (b *intakeBatcher) loop() {
	for {
		b.mu.Lock()
		n := min(len(b.pending), maxIntakeBatch)
		if n == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		if len(b.pending) == 0 {
			b.pending = nil
		}
		b.mu.Unlock()
		ds := make([]Delivery, len(batch))
		for i, c := range batch {
			ds[i] = c.d
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		res, err := b.record(ctx, ds)
		cancel()
		for i, c := range batch {
			if err != nil {
				c.err = err
			} else {
				c.res = res[i]
			}
			close(c.done)
		}
	}
}

// recordDeliveries is the Channels.Record of a host that sets none: the deliveries in one
// commit of the store, their turns left to Turn.
func recordDeliveries(store *registry.Channels) func(ctx context.Context, ds []Delivery) ([]Recorded, error) {
	return func(ctx context.Context, ds []Delivery) ([]Recorded, error) {
		dup, err := store.SeeDeliveries(ctx, DeliveryKeys(ds), nil)
		if err != nil {
			return nil, err
		}
		res := make([]Recorded, len(ds))
		for i, d := range dup {
			if d {
				res[i] = RecordedDuplicate
			}
		}
		return res, nil
	}
}

// DeliveryKeys are the keys of ds in the store.
func DeliveryKeys(ds []Delivery) []registry.DeliveryKey {
	keys := make([]registry.DeliveryKey, len(ds))
	for i, d := range ds {
		keys[i] = registry.DeliveryKey{AgentID: d.AgentID, Channel: string(d.Message.Channel), DeliveryID: d.Message.DeliveryID}
	}
	return keys
}

// batcher is the host's intake batcher, shared by the runtimes of the process.
func (h *Channels) batcher() *intakeBatcher {
	h.batchOnce.Do(func() {
		record := h.Record
		if record == nil {
			record = recordDeliveries(h.Store)
		}
		h.batch = &intakeBatcher{record: record}
	})
	return h.batch
}
