package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/memstore"
	"svc/runner/turn"
)

// A turn whose process died (issue 16): its session was stored running, with the user's message
// and the text streamed until the last checkpoint. A restarted process ends it as interrupted,
// with that text, and idle; a next turn on such a session does the same before it runs, so the
// history never holds two user messages in a row.
func TestTurnsLeftRunningEndInterrupted(t *testing.T) {
	ctx := context.Background()
	store := dbstore.New(dbtest.SQLite(t))
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	left := func(id string) {
		s := &sessions.Session{ID: id, Status: sessions.StatusRunning, CreatedAt: now, UpdatedAt: now,
			Messages: []sessions.Entry{
				{Message: models.Message{Role: models.RoleUser, Content: "first"}, At: now},
				{Message: models.Message{Role: models.RoleAssistant, Content: "echo: first"}, At: now},
				{Message: models.Message{Role: models.RoleUser, Content: "tell me a long story"}, At: now},
			}}
		s.State.Partial = "Once upon a"
		if err := store.Save(ctx, s, 0); err != nil {
			t.Fatal(err)
		}
	}
	check := func(id string, wantLen int) *sessions.Session {
		t.Helper()
		s, err := store.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status != sessions.StatusIdle || s.State.Partial != "" || len(s.Messages) < 4 || len(s.Messages) != wantLen {
			t.Fatalf("session %s: status %s, partial %q, %d messages, want %d", id, s.Status, s.State.Partial, len(s.Messages), wantLen)
		}
		if m := s.Messages[3]; m.Role != models.RoleAssistant || m.Content != "Once upon a" || !m.Interrupted {
			t.Errorf("the interrupted turn's entry = %+v", m)
		}
		return s
	}

	// A restart's sweep.
	left("ses_swept")
	locks := &memstore.Locks{}
	held, err := locks.TryLock(ctx, "ses_busy") // a live turn elsewhere: left alone
	if err != nil {
		t.Fatal(err)
	}
	left("ses_busy")
	n, err := turn.RecoverInterrupted(ctx, store, locks, func() time.Time { return now })
	if err != nil || n != 1 {
		t.Fatalf("recovered %d, %v; want 1", n, err)
	}
	check("ses_swept", 4)
	if s, _ := store.Load(ctx, "ses_busy"); s.Status != sessions.StatusRunning {
		t.Errorf("a session whose lock is held was ended")
	}
	held()

	// The next turn on a session left running.
	left("ses_next")
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Sessions: store, SharedStore: true, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	e.chat("", map[string]any{"message": "go on", "session_id": "ses_next"})
	s := check("ses_next", 6)
	if s.Messages[4].Content != "go on" || s.Messages[5].Content != "echo: go on" {
		t.Errorf("the next turn: %+v", s.Messages[4:])
	}
}

// A turn that streams for longer than turn.CheckpointEvery stores what it has said so far while
// it streams, and clears it when it ends.
func TestStreamingTurnCheckpoints(t *testing.T) {
	store := dbstore.New(dbtest.SQLite(t))
	model := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"Once ", "upon ", "a ", "time"}, Delay: 400 * time.Millisecond})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Sessions: store, SharedStore: true, Models: openaiModels(model), DefaultModel: agent.ModelRef{Provider: "openai", Model: "m"}})
	s := e.open(t, map[string]any{"message": "a story", "session_id": "ses_story"})
	var seen string
	deadline := time.Now().Add(20 * time.Second)
	for seen == "" && time.Now().Before(deadline) {
		if got, err := store.Load(context.Background(), "ses_story"); err == nil && got.Status == sessions.StatusRunning {
			seen = got.State.Partial
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.until("done")
	if !strings.HasPrefix(seen, "Once ") {
		t.Errorf("stored while streaming: %q", seen)
	}
	got, err := store.Load(context.Background(), "ses_story")
	if err != nil || got.State.Partial != "" || got.Status != sessions.StatusIdle {
		t.Errorf("after the turn: %+v, %v", got.State, err)
	}
}

// A turn whose process dies in its first second keeps what it streamed (issue 16): its first
// checkpoint comes at its first text delta after turn.FirstCheckpoint, not a whole
// turn.CheckpointEvery in. The model streams a word every 100 ms; half a second into the turn
// the store holds the session as a crash would leave it (running, with the streamed text), and a
// restarted process's sweep (turn.RecoverInterrupted, on a copy of that row in a store of its own)
// ends it with that text as an interrupted answer.
func TestTurnKilledInItsFirstSecondKeepsItsText(t *testing.T) {
	store := dbstore.New(dbtest.SQLite(t))
	words := strings.Fields("Once upon a time there was a runner that died young and a store that remembered")
	var text []string
	for _, w := range words {
		text = append(text, w+" ")
	}
	model := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: text, Delay: 100 * time.Millisecond})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Sessions: store, SharedStore: true, Models: openaiModels(model), DefaultModel: agent.ModelRef{Provider: "openai", Model: "m"}})
	began := time.Now()
	s := e.open(t, map[string]any{"message": "a story", "session_id": "ses_young"})
	// What the store holds if the process dies now: read from half a second into the turn until
	// it holds text, or the first second is over (a loaded machine delays the checkpoint's save).
	time.Sleep(500*time.Millisecond - time.Since(began))
	var crashed *sessions.Session
	var at time.Duration
	for {
		var err error
		crashed, err = store.Load(context.Background(), "ses_young")
		at = time.Since(began)
		if err != nil {
			t.Fatal(err)
		}
		if crashed.State.Partial != "" || at >= turn.CheckpointEvery {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.until("done")
	if at >= turn.CheckpointEvery {
		t.Skipf("the store was read %s into the turn, not within its first second (a loaded machine)", at)
	}
	full := strings.Join(text, "")
	if crashed.Status != sessions.StatusRunning || crashed.State.Partial == "" || !strings.HasPrefix(full, crashed.State.Partial) {
		t.Fatalf("%s into the turn the store holds status %s, partial %q; want running, with the start of %q", at, crashed.Status, crashed.State.Partial, full)
	}
	t.Logf("%s into the turn the store holds %q", at.Round(time.Millisecond), crashed.State.Partial)

	// A restarted process finds the session as the dead one left it.
	after := dbstore.New(dbtest.SQLite(t))
	if err := after.Save(context.Background(), crashed, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := turn.RecoverInterrupted(context.Background(), after, &memstore.Locks{}, time.Now); err != nil || n != 1 {
		t.Fatalf("recovered %d, %v; want 1", n, err)
	}
	got, err := after.Load(context.Background(), "ses_young")
	if err != nil {
		t.Fatal(err)
	}
	last := got.Messages[len(got.Messages)-1]
	if got.Status != sessions.StatusIdle || last.Role != models.RoleAssistant || !last.Interrupted || last.Content != crashed.State.Partial {
		t.Errorf("after the sweep: status %s, last message %+v; want idle and %q interrupted", got.Status, last, crashed.State.Partial)
	}
}
