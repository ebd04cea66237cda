package turn_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"svc/agent"
	"svc/runner/access"
	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
	"svc/runner/sessions/memstore"
	"svc/runner/tools"
	"svc/runner/turn"
)

var (
	alice = access.Identity{UserID: "alice", Method: access.MethodRuntimeToken}
	bob   = access.Identity{UserID: "bob", Method: access.MethodRuntimeToken}
)

// run opens a turn for st and runs it to its end, returning the turn's session id.
func run(t *testing.T, e *turn.Engine, st turn.Start) string {
	t.Helper()
	tu, err := e.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if res := tu.Run(context.Background(), &frames{}); res.Reason != loop.ReasonModelStop {
		t.Fatalf("reason %q, err %v", res.Reason, res.Err)
	}
	return tu.SessionID()
}

// Open creates a named session that does not exist, owned by the caller in the scope of its
// claim; a session the caller may not see is never continued: the caller gets a new session.
func TestOpenTenancy(t *testing.T) {
	r := newRig(t, models.Echo{}, nil, turn.StorageLimits{})
	scoped := access.Identity{UserID: "alice", Scope: "team-a", Method: access.MethodRuntimeToken}
	if id := run(t, r.e, turn.Start{SessionID: "thread:1", Caller: scoped, New: turn.Settings{ScopeID: "team-b"}, Text: "hi"}); id != "thread:1" {
		t.Fatalf("session %q, want the named one created", id)
	}
	if s := r.stored(t, "thread:1"); s.Owner != "alice" || s.ScopeID != "team-a" {
		t.Fatalf("owner %q scope %q, want alice in the claim's scope team-a", s.Owner, s.ScopeID)
	}
	for name, who := range map[string]access.Identity{"another user": bob, "another scope": {UserID: "alice", Scope: "team-b"}} {
		if id := run(t, r.e, turn.Start{SessionID: "thread:1", Caller: who, Text: "let me in"}); id == "thread:1" {
			t.Errorf("%s continued alice's session", name)
		}
	}
	if id := run(t, r.e, turn.Start{SessionID: "thread:1", Caller: access.Identity{Method: access.MethodAuthToken}, Text: "trusted"}); id != "thread:1" {
		t.Fatalf("a trusted caller got session %q, want alice's", id)
	}
	if s := r.stored(t, "thread:1"); len(s.Messages) != 4 {
		t.Fatalf("alice's session holds %d messages, want 2 turns of 2", len(s.Messages))
	}
}

// The session operations hide another user's session exactly as a missing one.
func TestSessionOperationsHide(t *testing.T) {
	r := newRig(t, models.Echo{}, nil, turn.StorageLimits{})
	ctx := context.Background()
	id := run(t, r.e, turn.Start{Caller: alice, Text: "mine"})
	var te *turn.Error
	notFound := func(op string, err error) {
		t.Helper()
		if !errors.As(err, &te) || te.Kind != turn.NotFound {
			t.Errorf("%s by bob: %v, want NotFound", op, err)
		}
	}
	_, err := r.e.Get(ctx, bob, id)
	notFound("Get", err)
	notFound("Queue", r.e.Queue(ctx, bob, id, "psst"))
	_, err = r.e.Update(ctx, bob, id, func(s *sessions.Session) error { s.Title = "bob's"; return nil })
	notFound("Update", err)
	notFound("Delete", r.e.Delete(ctx, bob, id))
	_, err = r.e.Get(ctx, alice, "nobody")
	notFound("Get of a missing session", err)
	if err := r.e.Queue(ctx, alice, id, "later"); !errors.As(err, &te) || te.Kind != turn.NoActiveTurn {
		t.Errorf("Queue with no turn running: %v, want NoActiveTurn", err)
	}
	s, err := r.e.Update(ctx, alice, id, func(s *sessions.Session) error { s.Title = "renamed"; return nil })
	if err != nil || s.Title != "renamed" || r.stored(t, id).Title != "renamed" {
		t.Fatalf("Update by alice: %v, title %q", err, s.Title)
	}
	if err := r.e.Delete(ctx, alice, id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Load(ctx, id); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("after Delete: %v, want not found", err)
	}
}

// Over a shared store, a session prepared in one runtime whose first turn another runtime ran
// continues from the stored session: the stored one wins, with nothing overwritten.
func TestOpenSharedStoredWins(t *testing.T) {
	store, locker := memstore.New(), &memstore.Locks{}
	engine := func() *turn.Engine {
		ag := hello(t)
		e, err := turn.NewEngine(turn.Config{
			Agent: ag, Profiles: turn.NewProfiles(ag, tools.Extensions{}, nil), Store: store, Blobs: &memstore.Blobs{}, Locker: locker,
			Cache:  live.New(live.Config{Store: store, Shared: true, Idle: time.Minute}),
			Models: func(agent.ModelRef) (models.Provider, error) { return models.Echo{}, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	one, two := engine(), engine()
	id, err := one.Prepare(alice, turn.Settings{Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, two, turn.Start{SessionID: id, Caller: alice, Text: "first"})
	run(t, one, turn.Start{SessionID: id, Caller: alice, Text: "second"})
	s, err := store.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) != 4 || s.Messages[0].Content != "first" || s.Messages[2].Content != "second" {
		t.Fatalf("stored %d messages, want both turns in order", len(s.Messages))
	}
}

// Open and Queue apply the preInput guardrail whatever the entry point: a blocked message stores
// nothing, a redacted one runs as redacted and the client is told.
func TestOpenGuard(t *testing.T) {
	ag := hello(t)
	guard, err := (&agent.PreInput{Block: []string{"forbidden"}, Redact: []string{`\d{4}`}}).Compile()
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	e, err := turn.NewEngine(turn.Config{
		Agent: ag, Profiles: turn.NewProfiles(ag, tools.Extensions{}, nil), Store: store, Blobs: &memstore.Blobs{},
		Locker: &memstore.Locks{}, Cache: live.New(live.Config{Store: store, Idle: time.Minute}), Guard: guard,
		Models: func(agent.ModelRef) (models.Provider, error) { return models.Echo{}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var be *turn.BlockedError
	if _, err := e.Open(ctx, turn.Start{SessionID: "g1", Text: "something forbidden"}); !errors.As(err, &be) || be.Rule != 0 {
		t.Fatalf("Open: %v, want BlockedError of rule 0", err)
	}
	if _, err := store.Load(ctx, "g1"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("a blocked message stored its session: %v", err)
	}
	if err := e.Queue(ctx, alice, "g1", "forbidden"); !errors.As(err, &be) {
		t.Fatalf("Queue: %v, want BlockedError", err)
	}
	tu, err := e.Open(ctx, turn.Start{SessionID: "g1", Text: "pin 1234"})
	if err != nil {
		t.Fatal(err)
	}
	var f frames
	tu.Run(ctx, &f)
	s, _ := store.Load(ctx, "g1")
	if !strings.Contains(f.types(), "input_redacted") || strings.Contains(s.Messages[0].Content, "1234") {
		t.Fatalf("frames %q, stored %q: want the message redacted and the client told", f.types(), s.Messages[0].Content)
	}
}
