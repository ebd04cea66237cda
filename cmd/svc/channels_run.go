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

// recordDeliveries records a batch of accepted deliveries in one commit, each with its turn,
// so that a delivery is acknowledged once both are stored. On the embedded queue (its jobs in
// the same database) the turns are enqueued in that commit. On another queue (Redis) each
// delivery is recorded with its turn pending, and the turns are enqueued after the batch's
// acknowledgements (dispatchTurns), off the path of the 200: a process that dies before leaves
// them to the sweep (workers.ChannelTurns), and a failed enqueue is retried by us, not by the
// platform.
func (p *platform) recordDeliveries() func(ctx context.Context, ds []runtime.Delivery) ([]runtime.Recorded, error) {
	return func(ctx context.Context, ds []runtime.Delivery) ([]runtime.Recorded, error) {
		keys := runtime.DeliveryKeys(ds)
		turns := make([][]byte, len(ds))
		for i, d := range ds {
			msg, err := json.Marshal(d.Message)
			if err != nil {
				return nil, fmt.Errorf("encode a channel message: %w", err)
			}
			if turns[i], err = json.Marshal(workers.ChannelTurn{AgentID: d.AgentID, Channel: keys[i].Channel, DeliveryID: keys[i].DeliveryID, Message: msg}); err != nil {
				return nil, fmt.Errorf("encode a channel turn: %w", err)
			}
		}
		var dup []bool
		var err error
		q, embedded := p.turns.(*dbqueue.Queue)
		if embedded {
			dup, err = p.stores.Channels.SeeDeliveries(ctx, keys, func(tx *gorm.DB, recorded []int) error {
				tasks := make([]workers.Task, len(recorded))
				for j, i := range recorded {
					tasks[j] = workers.ChannelTurnTaskOf(keys[i].AgentID, keys[i].Channel, keys[i].DeliveryID, turns[i])
				}
				_, err := q.EnqueueManyTx(ctx, tx, tasks, workers.ChannelTurnOptions()...) // a duplicate: the turn is queued already
				return err
			})
		} else {
			dup, err = p.stores.Channels.SeeDeliveriesPending(ctx, keys, turns)
		}
		if err != nil {
			return nil, err
		}
		res := make([]runtime.Recorded, len(ds))
		var pending []registry.PendingTurn
		for i, d := range dup {
			res[i] = runtime.RecordedQueued
			switch {
			case d:
				res[i] = runtime.RecordedDuplicate
			case !embedded:
				pending = append(pending, registry.PendingTurn{DeliveryKey: keys[i], Turn: turns[i]})
			}
		}
		if embedded {
			q.Wake()
		} else if len(pending) > 0 {
			p.dispatchTurns(pending)
		}
		return res, nil
	}
}

// dispatchTurns enqueues the pending turns of deliveries just recorded, in the background, once
// the deliveries this process is acknowledging are answered (at most ackPriority later): under
// a burst the enqueues do not share the CPU with the acknowledgements. platform.close waits
// for them.
func (p *platform) dispatchTurns(pending []registry.PendingTurn) {
	p.dispatching.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dispatchTimeout)
		defer cancel()
		if p.chans != nil {
			p.chans.AfterAcks(ctx, ackPriority)
		}
		faults.Point("channel.dispatch")
		if _, err := p.channelTurns().Enqueue(ctx, pending); err != nil {
			p.log.Warn("enqueue channel turns; the sweep enqueues those left", "turns", len(pending), "err", err)
		}
	})
}

// dispatchTimeout bounds the enqueueing of a batch's turns; those left are the sweep's.
const dispatchTimeout = 30 * time.Second

// channelTurns enqueues pending channel turns and sweeps those left (workers.ChannelTurns).
func (p *platform) channelTurns() *workers.ChannelTurns {
	return &workers.ChannelTurns{Store: p.stores.Channels, Queue: p.turns, Logger: p.log}
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
