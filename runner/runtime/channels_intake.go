package runtime

import (
	"context"
	"time"

	"svc/groupcommit"
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

// record records d with whatever deliveries come at the same time (a group commit: one
// commit for all, which serves many requests, so none of their contexts ends it), and says
// what was done with it.
func (h *Channels) record(d Delivery) (Recorded, error) {
	h.batchOnce.Do(func() {
		record := h.Record
		if record == nil {
			record = recordDeliveries(h.Store)
		}
		h.batch = &groupcommit.Group[Delivery, Recorded]{Max: maxIntakeBatch, Run: func(ds []Delivery) ([]Recorded, error) {
			ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
			defer cancel()
			return record(ctx, ds)
		}}
	})
	return h.batch.Do(d)
}
