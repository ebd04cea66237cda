package turn_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
	"svc/runner/sessions/memstore"
	"svc/runner/sse"
	"svc/runner/tools"
	"svc/runner/turn"
)

// frames collects a turn's frames.
type frames struct {
	mu  sync.Mutex
	all []sse.Frame
}

func (f *frames) Emit(fr *sse.Frame) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all = append(f.all, *fr)
	return nil
}

func (f *frames) types() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ts []string
	for _, fr := range f.all {
		if len(ts) == 0 || ts[len(ts)-1] != string(fr.Type) {
			ts = append(ts, string(fr.Type))
		}
	}
	return strings.Join(ts, " ")
}

// rig is an Engine over an in-memory store, with the given provider for every model.
type rig struct {
	e      *turn.Engine
	store  *memstore.Store
	cache  *live.Cache
	locker sessions.Locker
}

func newRig(t *testing.T, p models.Provider, locker sessions.Locker, limits turn.StorageLimits) *rig {
	t.Helper()
	ag := hello(t)
	store := memstore.New()
	cache := live.New(live.Config{Store: store, Idle: time.Minute})
	if locker == nil {
		locker = &memstore.Locks{}
	}
	e, err := turn.NewEngine(turn.Config{
		Agent: ag, Profiles: turn.NewProfiles(ag, tools.Extensions{}, nil), Cache: cache, Store: store, Blobs: &memstore.Blobs{},
		Locker: locker, Storage: limits,
		Models: func(agent.ModelRef) (models.Provider, error) { return p, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{e: e, store: store, cache: cache, locker: locker}
}

func hello(t *testing.T) *agent.Agent {
	t.Helper()
	ag, err := agent.LoadDir(agenttest.Dir(t, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

// start is what Open takes for text on a new session id.
func start(id, text string) turn.Start {
	return turn.Start{SessionID: id, Text: text}
}

func (r *rig) stored(t *testing.T, id string) *sessions.Session {
	t.Helper()
	s, err := r.store.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A turn runs without HTTP: frames to the sink, the result stored, the lock released.
func TestRunStoresTheTurn(t *testing.T) {
	r := newRig(t, models.Echo{}, nil, turn.StorageLimits{})
	tu, err := r.e.Open(context.Background(), start("ses_1", "hello there"))
	if err != nil {
		t.Fatal(err)
	}
	if s := r.stored(t, "ses_1"); len(s.Messages) != 1 || s.Status != sessions.StatusRunning {
		t.Fatalf("after Open the store holds %d messages, status %q; want the user's message, running", len(s.Messages), s.Status)
	}
	var f frames
	res := tu.Run(context.Background(), &f)
	if res.Reason != loop.ReasonModelStop {
		t.Fatalf("reason %q, err %v", res.Reason, res.Err)
	}
	if got := f.types(); !strings.HasPrefix(got, "init") || !strings.HasSuffix(got, "text_delta done") {
		t.Fatalf("frames %q, want init ... text_delta done", got)
	}
	s := r.stored(t, "ses_1")
	if len(s.Messages) != 2 || s.Status != sessions.StatusIdle || s.Title != "hello there" {
		t.Fatalf("stored %d messages, status %q, title %q", len(s.Messages), s.Status, s.Title)
	}
	if _, err := r.e.Lock(context.Background(), "ses_1"); err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
}

// A second turn on a locked session is Busy; a message over the session bound is refused with
// nothing stored and the lock released.
func TestRefusals(t *testing.T) {
	r := newRig(t, models.Echo{}, nil, turn.StorageLimits{SessionBytes: 10, AgentBytes: -1})
	st := start("ses_2", "more than ten bytes")
	var te *turn.Error
	held, err := r.e.Lock(context.Background(), "ses_2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.e.Open(context.Background(), st); !errors.As(err, &te) || te.Kind != turn.Busy {
		t.Fatalf("second lock: %v, want Busy", err)
	}
	held.Release()
	if _, err := r.e.Open(context.Background(), st); !errors.As(err, &te) || te.Kind != turn.SessionFull {
		t.Fatalf("Open: %v, want SessionFull", err)
	}
	if _, err := r.store.Load(context.Background(), "ses_2"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("a refused message stored its session: %v", err)
	}
	lk, err := r.e.Lock(context.Background(), "ses_2")
	if err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
	lk.Release()
	if _, _, err := turn.NewProfiles(hello(t), tools.Extensions{}, nil).Resolve("nobody", ""); !errors.As(err, &te) || te.Kind != turn.Invalid || te.Field != "agent" {
		t.Fatalf("unknown agent: %v, want Invalid naming agent", err)
	}
}

// waiting is a model that answers only when its context ends.
type waiting struct{ called chan struct{} }

func (w waiting) Stream(ctx context.Context, _ models.Request, _ func(models.Event) error) (models.Response, error) {
	close(w.called)
	<-ctx.Done()
	return models.Response{}, context.Cause(ctx)
}

// losable is a Locker whose locks are lost when lose is closed.
type losable struct {
	memstore.Locks
	lose chan struct{}
}

func (l *losable) TryLockWatch(ctx context.Context, id string) (func(), <-chan struct{}, error) {
	release, err := l.TryLock(ctx, id)
	return release, l.lose, err
}

// A lost lock stops the running turn at once: an error frame, reason error, and nothing of the
// turn's answer stored over what another runtime may now write.
func TestLostLockStopsTheTurn(t *testing.T) {
	m := waiting{called: make(chan struct{})}
	lk := &losable{lose: make(chan struct{})}
	r := newRig(t, m, lk, turn.StorageLimits{})
	tu, err := r.e.Open(context.Background(), start("ses_3", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-m.called; close(lk.lose) }()
	var f frames
	res := tu.Run(context.Background(), &f)
	if res.Reason != loop.ReasonError || !strings.Contains(f.types(), "error done") {
		t.Fatalf("reason %q, frames %q", res.Reason, f.types())
	}
	if s := r.stored(t, "ses_3"); len(s.Messages) != 1 {
		t.Fatalf("stored %d messages after a lost lock, want only the user's", len(s.Messages))
	}
	if r.cache.Len() != 0 {
		t.Fatalf("the session stayed in the cache: %d live", r.cache.Len())
	}
}
