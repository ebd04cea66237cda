package approvals

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPollInterval is how often a waiting turn reads its approval when no Redis client
// wakes it: the delay of an answer that arrives at another process without Redis.
const DefaultPollInterval = 500 * time.Millisecond

// channel is the Redis pub/sub channel of decided approvals; a message is the approval's id.
const channel = "svc:approvals:decided"

// HubConfig configures a Hub. Store is required.
type HubConfig struct {
	Store Store
	// Redis, when set, carries decisions to the other processes that share it at once.
	Redis redis.UniversalClient
	// PollInterval is how often a waiter reads its approval besides; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
}

// Hub decides approvals and wakes the turns that wait for them. One Hub serves every runtime
// of a process. It is safe for concurrent use; Close ends its Redis subscription.
type Hub struct {
	cfg     HubConfig
	mu      sync.Mutex
	waiters map[string]chan struct{}
	sub     *redis.PubSub
	done    chan struct{}
	wg      sync.WaitGroup
}

// NewHub returns a Hub of cfg and, with Redis, subscribes to the decisions of other processes.
func NewHub(ctx context.Context, cfg HubConfig) (*Hub, error) {
	if cfg.Store == nil {
		return nil, errors.New("approvals: HubConfig.Store is required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Hub{cfg: cfg, waiters: map[string]chan struct{}{}, done: make(chan struct{})}
	if cfg.Redis != nil {
		h.sub = cfg.Redis.Subscribe(ctx, channel)
		if _, err := h.sub.Receive(ctx); err != nil { // the subscription confirmation
			_ = h.sub.Close()
			return nil, err
		}
		h.wg.Add(1)
		go h.listen()
	}
	return h, nil
}

// Store is the Hub's store.
func (h *Hub) Store() Store { return h.cfg.Store }

// Close ends the Redis subscription.
func (h *Hub) Close() error {
	select {
	case <-h.done:
		return nil
	default:
	}
	close(h.done)
	var err error
	if h.sub != nil {
		err = h.sub.Close()
	}
	h.wg.Wait()
	return err
}

func (h *Hub) listen() {
	defer h.wg.Done()
	ch := h.sub.Channel()
	for {
		select {
		case <-h.done:
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			h.wake(m.Payload)
		}
	}
}

// wake tells a waiter of this process that approval id was decided.
func (h *Hub) wake(id string) {
	h.mu.Lock()
	ch := h.waiters[id]
	delete(h.waiters, id)
	h.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// Decide records status for the pending approval id of the session and wakes its waiter,
// wherever it runs. Errors as Store.Decide.
func (h *Hub) Decide(ctx context.Context, agentID, sessionID, id, status string) (Approval, error) {
	a, err := h.cfg.Store.Decide(ctx, agentID, sessionID, id, status, h.cfg.Now())
	if err != nil {
		return a, err
	}
	h.wake(id)
	if h.cfg.Redis != nil {
		if err := h.cfg.Redis.Publish(ctx, channel, id).Err(); err != nil {
			// The waiter still finds the decision when it next reads the record.
			h.cfg.Logger.WarnContext(ctx, "publish an approval's decision", "approval", id, "err", err)
		}
	}
	return a, nil
}

// Request records a pending approval of a (ID, AgentID, SessionID, ToolName and ToolID set),
// expiring after timeout.
func (h *Hub) Request(ctx context.Context, a Approval, timeout time.Duration) (Approval, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	a.Status, a.CreatedAt = Pending, h.cfg.Now().UTC()
	a.ExpiresAt = a.CreatedAt.Add(timeout)
	h.mu.Lock()
	h.waiters[a.ID] = make(chan struct{}) // before the record exists: no decision can be missed
	h.mu.Unlock()
	if err := h.cfg.Store.Create(ctx, a); err != nil {
		h.forget(a.ID)
		return Approval{}, err
	}
	return a, nil
}

func (h *Hub) forget(id string) {
	h.mu.Lock()
	delete(h.waiters, id)
	h.mu.Unlock()
}

// Wait blocks until approval a (from Request) is decided and returns it: approved, denied,
// expired when no answer came before a.ExpiresAt, or cancelled when ctx ended first (the
// record is then cancelled, so that a late answer finds it decided).
func (h *Hub) Wait(ctx context.Context, a Approval) (Approval, error) {
	h.mu.Lock()
	woken := h.waiters[a.ID]
	h.mu.Unlock()
	defer h.forget(a.ID)
	poll := time.NewTicker(h.cfg.PollInterval)
	defer poll.Stop()
	expire := time.NewTimer(a.ExpiresAt.Sub(h.cfg.Now()))
	defer expire.Stop()
	if woken == nil {
		// Decided before Wait began (the answer came at once, and wake took the channel):
		// read the decision now rather than at the next poll.
		if got, err := h.cfg.Store.Get(ctx, a.ID); err == nil && got.Status != Pending {
			return got, nil
		}
	}
	for {
		select {
		case <-woken:
			woken = nil // read the decision below; a nil channel blocks from now on
		case <-poll.C:
		case <-expire.C:
			return h.settle(context.WithoutCancel(ctx), a, Expired)
		case <-ctx.Done():
			return h.settle(context.WithoutCancel(ctx), a, Cancelled)
		}
		got, err := h.cfg.Store.Get(ctx, a.ID)
		if err != nil {
			if ctx.Err() != nil {
				continue // ctx.Done is taken on the next round
			}
			return Approval{}, err
		}
		if got.Status != Pending {
			return got, nil
		}
	}
}

// settle decides a as status unless it was decided meanwhile, and returns the decision.
func (h *Hub) settle(ctx context.Context, a Approval, status string) (Approval, error) {
	got, err := h.cfg.Store.Decide(ctx, a.AgentID, a.SessionID, a.ID, status, h.cfg.Now())
	if errors.Is(err, ErrDecided) {
		return got, nil
	}
	return got, err
}
