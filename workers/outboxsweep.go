package workers

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"svc/registry"
)

// Defaults of OutboxSweeper.
const (
	DefaultOutboxStale = 5 * time.Minute
	DefaultOutboxSweep = time.Minute
	outboxSweepBatch   = 500
)

// OutboxSweeper enqueues again the sending of channel outbox entries whose channel:send task
// was lost: a process that died between storing a reply in the outbox and enqueueing its
// sending, or a sender that died holding its claim. An entry is taken when it has waited
// Stale past its time (or its claim ran out); each is requeued by one sweep only
// (registry.Channels.Requeue), and the sender claims it before sending
// (registry.Channels.ClaimOutbox), so a late original task and the sweep's never both send it.
type OutboxSweeper struct {
	Store *registry.Channels
	Queue Queue
	// Stale is how long past its time an entry waits before it is swept (DefaultOutboxStale
	// when 0): longer than a send task normally waits in the queue.
	Stale time.Duration
	// Every is the time between sweeps (DefaultOutboxSweep when 0).
	Every  time.Duration
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Run sweeps every Every until ctx is done.
func (s *OutboxSweeper) Run(ctx context.Context) error {
	every := s.Every
	if every <= 0 {
		every = DefaultOutboxSweep
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			log.Warn("channel outbox sweep", "requeued", n, "err", err)
		} else if n > 0 {
			log.Info("channel outbox sweep: replies whose sending was lost are queued again", "entries", n)
		}
	}
}

// Sweep enqueues again the sending of the stale entries (at most 500 a sweep), one channel:send
// task per reply (the entries of one delivery's reply, in order), and says how many entries
// it requeued.
func (s *OutboxSweeper) Sweep(ctx context.Context) (int, error) {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	stale := s.Stale
	if stale <= 0 {
		stale = DefaultOutboxStale
	}
	before := now.Add(-stale)
	entries, err := s.Store.StaleOutbox(ctx, before, outboxSweepBatch)
	if err != nil {
		return 0, err
	}
	// One send per reply, its parts in order: a reply's keys are <prefix><index>.
	type reply struct{ agentID, channel, prefix string }
	var order []reply
	ids := map[reply][]string{}
	var errs []error
	for _, e := range entries {
		ok, err := s.Store.Requeue(ctx, e.ID, before)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue // sent, claimed or requeued meanwhile
		}
		r := reply{e.AgentID, e.Channel, e.IdempotencyKey[:strings.LastIndex(e.IdempotencyKey, ":")+1]}
		if _, seen := ids[r]; !seen {
			order = append(order, r)
		}
		ids[r] = append(ids[r], e.ID)
	}
	n := 0
	for _, r := range order {
		// At is now: a task ID of its own, beside a late original task (the claim keeps them
		// from both sending).
		if err := EnqueueChannelSend(ctx, s.Queue, ChannelSend{AgentID: r.agentID, Channel: r.channel, Outbox: ids[r], At: now}); err != nil {
			errs = append(errs, err) // pending from now: the next sweep after Stale takes it again
			continue
		}
		n += len(ids[r])
	}
	return n, errors.Join(errs...)
}
