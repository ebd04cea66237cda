package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"svc/faults"
	"svc/registry"
	"svc/runner"
	"svc/runner/channels"
	"svc/runner/runtime"
	"svc/workers"
	"svc/workers/dbqueue"
)

// The messaging channels on the platform: a runtime's channel routes record a delivery and
// enqueue its turn (channel:turn); a worker runs the turn on the agent's active production
// deployment, stores the reply's calls in the outbox and enqueues their sending (channel:send),
// which a worker does through the same runtime (the bot tokens are the agent's secrets). A
// worker that dies mid-turn loses nothing: the task runs again after its lease, and the outbox's
// idempotency keys keep a re-run from sending a reply twice.

// channelHost is what every runtime of the process is given for its channels: the registry's
// store and the queue.
func (p *platform) channelHost() *runtime.Channels {
	return &runtime.Channels{
		Store: p.stores.Channels,
		Turn: func(ctx context.Context, agentID string, m *channels.Message) error {
			msg, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("encode a channel message: %w", err)
			}
			return workers.EnqueueChannelTurn(ctx, p.turns, workers.ChannelTurn{AgentID: agentID, Channel: string(m.Channel), DeliveryID: m.DeliveryID, Message: msg})
		},
		Send: func(ctx context.Context, agentID string, s runtime.ChannelSend) error {
			return workers.EnqueueChannelSend(ctx, p.turns, workers.ChannelSend{AgentID: agentID, Channel: s.Channel, Outbox: s.Outbox, At: s.At})
		},
		Record:   p.recordDeliveries(),
		SlackAPI: p.cfg.SlackAPIURL, TelegramAPI: p.cfg.TelegramAPIURL,
	}
}

// recordDeliveries records a batch of accepted deliveries in one commit, with one task for the
// turns of those new (channel:turns, whose handler enqueues a task of each turn once the
// acknowledgements are out): a queue row or call per batch while the platform waits to
// answer, not one per delivery. On the embedded queue (its jobs in the same database) the task
// is in that commit too: a delivery is recorded with its turn or not at all. On Redis it is
// enqueued after the commit; when that fails the batch's new deliveries are forgotten and each
// is answered 503, so that the platform's retry is taken.
func (p *platform) recordDeliveries() func(ctx context.Context, ds []runtime.Delivery) ([]runtime.Recorded, error) {
	turns := func(ds []runtime.Delivery, recorded []int) (workers.Task, []workers.Option, error) {
		ts := make([]workers.ChannelTurn, len(recorded))
		for j, i := range recorded {
			m := ds[i].Message
			msg, err := json.Marshal(m)
			if err != nil {
				return workers.Task{}, nil, fmt.Errorf("encode a channel message: %w", err)
			}
			ts[j] = workers.ChannelTurn{AgentID: ds[i].AgentID, Channel: string(m.Channel), DeliveryID: m.DeliveryID, Message: msg}
		}
		return workers.ChannelTurnsTask(ts)
	}
	results := func(dup []bool) []runtime.Recorded {
		res := make([]runtime.Recorded, len(dup))
		for i, d := range dup {
			res[i] = runtime.RecordedQueued
			if d {
				res[i] = runtime.RecordedDuplicate
			}
		}
		return res
	}
	if q, ok := p.turns.(*dbqueue.Queue); ok {
		return func(ctx context.Context, ds []runtime.Delivery) ([]runtime.Recorded, error) {
			dup, err := p.stores.Channels.SeeDeliveries(ctx, runtime.DeliveryKeys(ds), func(tx *gorm.DB, recorded []int) error {
				task, opts, err := turns(ds, recorded)
				if err == nil {
					err = q.EnqueueTx(ctx, tx, task, opts...)
				}
				return err
			})
			if err != nil {
				return nil, err
			}
			q.Wake()
			return results(dup), nil
		}
	}
	return func(ctx context.Context, ds []runtime.Delivery) ([]runtime.Recorded, error) {
		keys := runtime.DeliveryKeys(ds)
		dup, err := p.stores.Channels.SeeDeliveries(ctx, keys, nil)
		if err != nil {
			return nil, err
		}
		var recorded []int
		for i, d := range dup {
			if !d {
				recorded = append(recorded, i)
			}
		}
		if len(recorded) == 0 {
			return results(dup), nil
		}
		task, opts, err := turns(ds, recorded)
		if err == nil {
			err = p.turns.Enqueue(ctx, task, opts...)
		}
		if err != nil {
			for _, i := range recorded {
				k := keys[i]
				if ferr := p.stores.Channels.ForgetDelivery(context.WithoutCancel(ctx), k.AgentID, k.Channel, k.DeliveryID); ferr != nil {
					p.log.ErrorContext(ctx, "channels: forget a delivery", "channel", k.Channel, "delivery_id", k.DeliveryID, "err", ferr)
				}
			}
			return nil, fmt.Errorf("enqueue the turns of %d deliveries: %w", len(recorded), err)
		}
		return results(dup), nil
	}
}

// channelRunner is the part of a runtime the channel tasks use.
type channelRunner interface {
	RunChannel(ctx context.Context, task runtime.ChannelTask) error
}

// ackPriority bounds how long a channel turn waits for the deliveries this process is
// acknowledging (Channels.AfterAcks): under a burst the acknowledgements, which Slack wants
// within 3 s, do not share the CPU with the turns of the deliveries before them.
const ackPriority = 250 * time.Millisecond

// handleChannels routes the channel tasks of mux to the runtimes of router.
func (p *platform) handleChannels(mux *workers.ServeMux, router *runner.Router) {
	h := &workers.ChannelHandler{
		Turns: func(ctx context.Context, ts []workers.ChannelTurn) error {
			if p.chans != nil { // the turns of a batch are enqueued after the acks of the next
				p.chans.AfterAcks(ctx, ackPriority)
			}
			if err := workers.EnqueueChannelTurns(ctx, p.turns, ts); err != nil {
				return err
			}
			faults.Point("channel.turns") // the turns enqueued, the batch's task not yet done
			return nil
		},
		Turn: func(ctx context.Context, t workers.ChannelTurn) error {
			var m channels.Message
			if err := json.Unmarshal(t.Message, &m); err != nil {
				return fmt.Errorf("%w: channel message: %v", workers.ErrSkipRetry, err)
			}
			faults.Point("channel.turn")
			if p.chans != nil { // a delivery's 200 goes before the turns of those acknowledged already
				p.chans.AfterAcks(ctx, ackPriority)
			}
			return p.runChannel(ctx, router, t.AgentID, runtime.ChannelTask{Message: &m})
		},
		Send: func(ctx context.Context, s workers.ChannelSend) error {
			return p.runChannel(ctx, router, s.AgentID, runtime.ChannelTask{Send: &runtime.ChannelSend{Channel: s.Channel, Outbox: s.Outbox, At: s.At}})
		},
	}
	mux.Handle(workers.TaskChannelTurns, h)
	mux.Handle(workers.TaskChannelTurn, h)
	mux.Handle(workers.TaskChannelSend, h)
}

// runChannel does task on the runtime of agentID's active production deployment. Work that
// cannot succeed (no deployment any more, the channel gone from svc.json) is not retried.
func (p *platform) runChannel(ctx context.Context, router *runner.Router, agentID string, task runtime.ChannelTask) error {
	d, err := p.deploys.Active(ctx, agentID, "production")
	if errors.Is(err, registry.ErrNoActive) {
		return fmt.Errorf("%w: agent %s has no active production deployment", workers.ErrSkipRetry, agentID)
	}
	if err != nil {
		return err
	}
	rt, err := router.Deployment(ctx, d.ID)
	if err != nil {
		return fmt.Errorf("load deployment %s: %w", d.ID, err)
	}
	cr, ok := rt.(channelRunner)
	if !ok {
		return fmt.Errorf("%w: the runtime of deployment %s runs no channels", workers.ErrSkipRetry, d.ID)
	}
	if err := cr.RunChannel(ctx, task); err != nil {
		if errors.Is(err, runtime.ErrChannelDropped) {
			p.log.WarnContext(ctx, "channel work dropped", "agent_id", agentID, "err", err)
			return fmt.Errorf("%w: %v", workers.ErrSkipRetry, err)
		}
		return err
	}
	return nil
}
