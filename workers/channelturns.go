package workers

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"svc/registry"
)

// Defaults of ChannelTurns.
const (
	DefaultTurnStale = 10 * time.Second
	DefaultTurnSweep = 5 * time.Second
	turnSweepBatch   = 500
)

// ChannelTurns enqueues the turns of deliveries recorded with their turns pending
// (registry.Channels.SeeDeliveriesPending), the way of a queue outside the database: the
// process that took the deliveries calls Enqueue once they are acknowledged, and Run sweeps up
// the turns of those whose process died first, or whose enqueue failed. A turn enqueued twice
// (a slow Enqueue and the sweep) is one task while it is pending or running (its task ID),
// and a turn run again finds its answer in the outbox and runs no second turn.
type ChannelTurns struct {
	Store *registry.Channels
	Queue Queue
	// Stale is how long a pending turn waits before the sweep takes it (DefaultTurnStale when
	// 0): far longer than an Enqueue right after its delivery's acknowledgement takes.
	Stale time.Duration
	// Every is the time between sweeps (DefaultTurnSweep when 0).
	Every  time.Duration
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Enqueue enqueues the turns of pending, each a ChannelTurn as its payload, and records those
// that went (one statement for all); it says how many went. A turn that failed stays pending
// for the sweep.
func (c *ChannelTurns) Enqueue(ctx context.Context, pending []registry.PendingTurn) (int, error) {
	queued := make([]registry.DeliveryKey, 0, len(pending))
	var errs []error
	for _, p := range pending {
		err := c.Queue.Enqueue(ctx, ChannelTurnTaskOf(p.AgentID, p.Channel, p.DeliveryID, p.Turn), ChannelTurnOptions()...)
		if err != nil && !errors.Is(err, ErrDuplicate) {
			errs = append(errs, err)
			continue
		}
		queued = append(queued, p.DeliveryKey)
	}
	if err := c.Store.TurnsQueued(ctx, queued); err != nil {
		errs = append(errs, err)
	}
	return len(queued), errors.Join(errs...)
}

// Sweep enqueues the turns pending for longer than Stale (at most 500 a sweep) and says how
// many it enqueued.
func (c *ChannelTurns) Sweep(ctx context.Context) (int, error) {
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	stale := c.Stale
	if stale <= 0 {
		stale = DefaultTurnStale
	}
	pending, err := c.Store.PendingTurns(ctx, now.Add(-stale), turnSweepBatch)
	if err != nil || len(pending) == 0 {
		return 0, err
	}
	return c.Enqueue(ctx, pending)
}

// Run sweeps every Every until ctx is done.
func (c *ChannelTurns) Run(ctx context.Context) error {
	return sweepEvery(ctx, c.Every, DefaultTurnSweep, c.Logger, c.Sweep,
		"channel turn sweep", "channel turn sweep: turns of acknowledged deliveries whose enqueue was lost are queued")
}

// sweepEvery calls sweep every every (dflt when 0) until ctx is done, and logs what each
// did: a failure as warn "<what>", a sweep that found work as info found.
func sweepEvery(ctx context.Context, every, dflt time.Duration, log *slog.Logger, sweep func(context.Context) (int, error), what, found string) error {
	if every <= 0 {
		every = dflt
	}
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
		if n, err := sweep(ctx); err != nil && ctx.Err() == nil {
			log.Warn(what, "count", n, "err", err)
		} else if n > 0 {
			log.Info(found, "count", n)
		}
	}
}
