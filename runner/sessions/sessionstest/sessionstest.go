package sessionstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/models"
	"svc/runner/sessions"
)

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) sessions.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st sessions.Store)
	}{
		{"LoadMissing", testLoadMissing},
		{"RoundTrip", testRoundTrip},
		{"AppendOnly", testAppendOnly},
		{"CopiesAreIndependent", testCopies},
		{"List", testList},
		{"ListLimit", testListLimit},
		{"Delete", testDelete},
		{"Concurrent", testConcurrent},
		{"Refresh", testRefresh},
		{"StoredBytes", testStoredBytes},
		{"TraceSession", testTraceSession},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// base is a fixed instant; stores keep at least millisecond precision.
var base = time.Date(2026, 5, 6, 7, 8, 9, 123_000_000, time.UTC)

func sample(id string) *sessions.Session {
	return &sessions.Session{
		ID: id, AgentID: "ag1", Owner: "u1", ScopeID: "tenant-a", Agent: "default", Skill: "refunds",
		DeployID: "d1", Model: sessions.Model{Provider: "openai", Model: "gpt-4o", Effort: "low"},
		MaxSessionTokens: 1000, Usage: sessions.Usage{InputTokens: 10, OutputTokens: 5, CachedTokens: 2},
		StoredBytes: 1234, Title: "Refund please", Status: sessions.StatusIdle,
		Metadata:  map[string]string{"userId": "u1", "screen": "home"},
		Context:   map[string]string{"plan": "team"},
		State:     sessions.State{ActiveSkills: []string{"refunds"}, LoadedKnowledge: []string{"plans"}, Summary: "earlier", SummaryUpTo: 1},
		CreatedAt: base, UpdatedAt: base.Add(time.Second),
		Messages: []sessions.Entry{
			{Message: models.Message{Role: models.RoleUser, Content: "I want a refund",
				Parts: []models.Part{{MimeType: "image/png", Filename: "receipt.png", Ref: "sha256:" + fmt.Sprintf("%064x", 7), Size: 1000}}}, At: base},
			{Message: models.Message{Role: models.RoleAssistant, Content: "Let me check", Thinking: "hm",
				ToolCalls: []models.ToolCall{{ID: "c1", Name: "load_knowledge", Arguments: json.RawMessage(`{"name":"plans"}`)}}}, At: base},
			{Message: models.Message{Role: models.RoleTool, ToolCallID: "c1", ToolName: "load_knowledge", Content: "# Plans", IsError: true}, At: base},
			{Message: models.Message{Role: models.RoleAssistant, Content: "part"}, At: base, Interrupted: true},
		},
	}
}

func mustSave(t *testing.T, st sessions.Store, s *sessions.Session, from int) {
	t.Helper()
	if err := st.Save(context.Background(), s, from); err != nil {
		t.Fatalf("Save(%s, %d): %v", s.ID, from, err)
	}
}

func mustLoad(t *testing.T, st sessions.Store, id string) *sessions.Session {
	t.Helper()
	s, err := st.Load(context.Background(), id)
	if err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	return s
}

func testLoadMissing(t *testing.T, st sessions.Store) {
	if _, err := st.Load(context.Background(), "nope"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Load(missing) err = %v, want ErrNotFound", err)
	}
}

func testRoundTrip(t *testing.T, st sessions.Store) {
	want := sample("s1")
	mustSave(t, st, want, 0)
	got := mustLoad(t, st, "s1")
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("Load after Save (-want +got):\n%s", d)
	}
}

func testAppendOnly(t *testing.T, st sessions.Store) {
	s := sample("s1")
	s.Messages = s.Messages[:2]
	mustSave(t, st, s, 0)
	// Record only.
	s.Title = "renamed"
	s.Metadata["screen"] = "billing"
	mustSave(t, st, s, len(s.Messages))
	// Two more entries; from=1 re-sends one that is stored already: it is kept, not duplicated.
	s.Messages = sample("s1").Messages
	s.Usage.InputTokens = 99
	mustSave(t, st, s, 1)
	got := mustLoad(t, st, "s1")
	if d := cmp.Diff(s, got); d != "" {
		t.Fatalf("Load (-want +got):\n%s", d)
	}
}

func testCopies(t *testing.T, st sessions.Store) {
	s := sample("s1")
	mustSave(t, st, s, 0)
	s.Metadata["screen"] = "changed-after-save"
	s.State.ActiveSkills[0] = "changed"
	got := mustLoad(t, st, "s1")
	if got.Metadata["screen"] != "home" || got.State.ActiveSkills[0] != "refunds" {
		t.Fatalf("store shares maps with the saved value: %v %v", got.Metadata, got.State.ActiveSkills)
	}
	got.Metadata["screen"] = "changed-after-load"
	got.Messages = append(got.Messages, sessions.Entry{Message: models.Message{Role: models.RoleUser, Content: "x"}})
	again := mustLoad(t, st, "s1")
	if again.Metadata["screen"] != "home" || len(again.Messages) != 4 {
		t.Fatalf("store shares state with a loaded value: %v, %d messages", again.Metadata, len(again.Messages))
	}
}

func testList(t *testing.T, st sessions.Store) {
	for i, c := range []struct{ id, agent, scope string }{
		{"a", "ag1", "t1"}, {"b", "ag1", "t2"}, {"c", "ag1", "t1"}, {"d", "ag2", "t1"},
	} {
		s := sample(c.id)
		s.AgentID, s.ScopeID = c.agent, c.scope
		s.UpdatedAt = base.Add(time.Duration(i) * time.Minute)
		if c.agent == "ag1" {
			s.Metadata = map[string]string{"userId": "u-" + c.id}
			if c.id != "a" {
				s.Metadata["screen"] = "home"
			}
		}
		mustSave(t, st, s, 0)
	}
	ids := func(q sessions.Query) []string {
		list, err := st.List(context.Background(), q)
		if err != nil {
			t.Fatalf("List(%+v): %v", q, err)
		}
		out := []string{}
		for _, s := range list {
			if s.Messages != nil {
				t.Errorf("List returned messages for %s", s.ID)
			}
			out = append(out, s.ID)
		}
		return out
	}
	if d := cmp.Diff([]string{"c", "b", "a"}, ids(sessions.Query{AgentID: "ag1"})); d != "" {
		t.Errorf("List(ag1) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"c", "a"}, ids(sessions.Query{AgentID: "ag1", ScopeID: "t1"})); d != "" {
		t.Errorf("List(ag1, t1) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"c"}, ids(sessions.Query{AgentID: "ag1", Metadata: map[string]string{"userId": "u-c"}})); d != "" {
		t.Errorf("List(userId u-c) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"c", "b"}, ids(sessions.Query{AgentID: "ag1", Metadata: map[string]string{"screen": "home"}})); d != "" {
		t.Errorf("List(screen home) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"b"}, ids(sessions.Query{AgentID: "ag1", Metadata: map[string]string{"screen": "home", "userId": "u-b"}})); d != "" {
		t.Errorf("List(screen home, userId u-b) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{}, ids(sessions.Query{AgentID: "ag1", Metadata: map[string]string{"userId": "nobody"}})); d != "" {
		t.Errorf("List(userId nobody) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"c"}, ids(sessions.Query{AgentID: "ag1", Limit: 1})); d != "" {
		t.Errorf("List(limit 1) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{}, ids(sessions.Query{AgentID: "other"})); d != "" {
		t.Errorf("List(other) (-want +got):\n%s", d)
	}
	list, err := st.List(context.Background(), sessions.Query{AgentID: "ag2"})
	if err != nil || len(list) != 1 {
		t.Fatalf("List(ag2) = %v, %v", list, err)
	}
	want := sample("d")
	want.AgentID, want.ScopeID, want.UpdatedAt, want.Messages = "ag2", "t1", base.Add(3*time.Minute), nil
	if d := cmp.Diff(want, list[0]); d != "" {
		t.Errorf("List item (-want +got):\n%s", d)
	}
}

func testListLimit(t *testing.T, st sessions.Store) {
	// Saved from a few goroutines: a database store takes a round trip per Save.
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < sessions.DefaultListLimit+3; i += workers {
				s := sample(fmt.Sprintf("s%04d", i))
				s.Messages = nil
				s.UpdatedAt = base.Add(time.Duration(i) * time.Second)
				if err := st.Save(context.Background(), s, 0); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	list, err := st.List(context.Background(), sessions.Query{AgentID: "ag1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != sessions.DefaultListLimit {
		t.Fatalf("List without limit returned %d sessions, want %d", len(list), sessions.DefaultListLimit)
	}
	if list[0].ID != fmt.Sprintf("s%04d", sessions.DefaultListLimit+2) {
		t.Errorf("newest first: got %s", list[0].ID)
	}
}

// testTraceSession: a store that records runs and finds them by trace (sessions.TraceFinder)
// answers the session of the agent's run with that trace, ErrNoTrace for a trace no run of the
// agent had, and forgets a session's traces with it. Other stores skip it.
func testTraceSession(t *testing.T, st sessions.Store) {
	rec, ok1 := st.(sessions.RunRecorder)
	tf, ok2 := st.(sessions.TraceFinder)
	if !ok1 || !ok2 {
		t.Skip("the store does not find runs by trace")
	}
	ctx := context.Background()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	s := sample("s1")
	run := &sessions.Run{ID: "run_1", AgentID: s.AgentID, SessionID: s.ID, Kind: sessions.RunChat, StartedAt: base,
		EndedAt: base.Add(time.Second), Reason: "model_stop", TraceID: trace}
	if err := rec.SaveRun(ctx, s, 0, run); err != nil {
		t.Fatal(err)
	}
	untraced := sample("s2")
	if err := rec.SaveRun(ctx, untraced, 0, &sessions.Run{ID: "run_2", AgentID: s.AgentID, SessionID: "s2", StartedAt: base, EndedAt: base, Reason: "model_stop"}); err != nil {
		t.Fatal(err)
	}
	if id, err := tf.TraceSession(ctx, s.AgentID, trace); err != nil || id != "s1" {
		t.Errorf("TraceSession = %q, %v; want s1", id, err)
	}
	for _, q := range []struct{ agent, trace string }{{"ag_other", trace}, {s.AgentID, "00000000000000000000000000000001"}, {s.AgentID, ""}} {
		if id, err := tf.TraceSession(ctx, q.agent, q.trace); !errors.Is(err, sessions.ErrNoTrace) {
			t.Errorf("TraceSession(%q, %q) = %q, %v; want ErrNoTrace", q.agent, q.trace, id, err)
		}
	}
	if err := st.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if id, err := tf.TraceSession(ctx, s.AgentID, trace); !errors.Is(err, sessions.ErrNoTrace) {
		t.Errorf("TraceSession after Delete = %q, %v; want ErrNoTrace", id, err)
	}
}

func testDelete(t *testing.T, st sessions.Store) {
	mustSave(t, st, sample("s1"), 0)
	mustSave(t, st, sample("s2"), 0)
	if err := st.Delete(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(context.Background(), "s1"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Load after Delete err = %v, want ErrNotFound", err)
	}
	if err := st.Delete(context.Background(), "s1"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("second Delete err = %v, want ErrNotFound", err)
	}
	mustLoad(t, st, "s2")
	// A deleted id can be used again, with a fresh history.
	s := sample("s1")
	s.Messages = s.Messages[:1]
	mustSave(t, st, s, 0)
	if got := mustLoad(t, st, "s1"); len(got.Messages) != 1 {
		t.Fatalf("recreated session has %d messages, want 1", len(got.Messages))
	}
}

func testConcurrent(t *testing.T, st sessions.Store) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			s := sample(fmt.Sprintf("c%d", i))
			for j := 1; j <= len(s.Messages); j++ {
				part := *s
				part.Messages = s.Messages[:j]
				if err := st.Save(context.Background(), &part, j-1); err != nil {
					errs <- err
					return
				}
			}
			if _, err := st.Load(context.Background(), s.ID); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range 8 {
		if got := mustLoad(t, st, fmt.Sprintf("c%d", i)); len(got.Messages) != 4 {
			t.Errorf("c%d has %d messages, want 4", i, len(got.Messages))
		}
	}
}

// testRefresh checks a Refresher (stores without one skip it).
func testRefresh(t *testing.T, st sessions.Store) {
	r, ok := st.(sessions.Refresher)
	if !ok {
		t.Skip("the store has no Refresh")
	}
	ctx := context.Background()
	full := sample("s1")
	s := sample("s1")
	s.Messages = s.Messages[:2]
	mustSave(t, st, s, 0)
	have := mustLoad(t, st, "s1")

	// Nothing new: the same session.
	got, err := r.Refresh(ctx, have)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(have, got); d != "" {
		t.Fatalf("Refresh with nothing new (-want +got):\n%s", d)
	}
	// Another writer adds two entries and changes the record: both come back, and have is untouched.
	s.Messages = full.Messages
	s.Title = "renamed elsewhere"
	s.Usage.OutputTokens = 77
	mustSave(t, st, s, 2)
	got, err = r.Refresh(ctx, have)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(s, got); d != "" {
		t.Fatalf("Refresh after another writer (-want +got):\n%s", d)
	}
	if len(have.Messages) != 2 || have.Title != "Refund please" {
		t.Fatalf("Refresh changed its argument: %d messages, title %q", len(have.Messages), have.Title)
	}
	// Deleted: ErrNotFound.
	if err := st.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Refresh(ctx, have); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Refresh of a deleted session = %v, want ErrNotFound", err)
	}
	// Deleted and created anew under the same id: the new history only.
	anew := sample("s1")
	anew.CreatedAt = base.Add(time.Hour)
	anew.Messages = []sessions.Entry{{Message: models.Message{Role: models.RoleUser, Content: "a new start"}, At: anew.CreatedAt}}
	mustSave(t, st, anew, 0)
	got, err = r.Refresh(ctx, have)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(anew, got); d != "" {
		t.Fatalf("Refresh of a session created anew (-want +got):\n%s", d)
	}
}

// testStoredBytes: StoredBytes is kept with the record, and a Sizer sums it over an agent's
// sessions (other agents' are not counted).
func testStoredBytes(t *testing.T, st sessions.Store) {
	a, b, other := sample("s1"), sample("s2"), sample("s3")
	a.StoredBytes, b.StoredBytes, other.StoredBytes, other.AgentID = 100, 250, 4000, "ag2"
	for _, s := range []*sessions.Session{a, b, other} {
		mustSave(t, st, s, 0)
	}
	if got := mustLoad(t, st, "s2").StoredBytes; got != 250 {
		t.Errorf("StoredBytes = %d, want 250", got)
	}
	sz, ok := st.(sessions.Sizer)
	if !ok {
		t.Fatalf("%T does not implement sessions.Sizer", st)
	}
	for agent, want := range map[string]int64{"ag1": 350, "ag2": 4000, "none": 0} {
		if got, err := sz.AgentStoredBytes(context.Background(), agent); err != nil || got != want {
			t.Errorf("AgentStoredBytes(%s) = %d, %v; want %d", agent, got, err, want)
		}
	}
}

// RunBlobs runs the suite of sessions.Blobs; newBlobs returns an empty store.
func RunBlobs(t *testing.T, newBlobs func(t *testing.T) sessions.Blobs) {
	ctx := context.Background()
	b := newBlobs(t)
	data := []byte("the content of an attachment")
	ref := sessions.BlobRef(data)
	if _, err := b.Get(ctx, "s1", ref); !errors.Is(err, sessions.ErrBlobNotFound) {
		t.Fatalf("Get before Put = %v, want ErrBlobNotFound", err)
	}
	// Client-chosen session ids may hold characters an object key may not.
	for _, session := range []string{"s1", "..", "a:b.c"} {
		if err := b.Put(ctx, session, ref, data); err != nil {
			t.Fatalf("Put(%q) = %v", session, err)
		}
	}
	if err := b.Put(ctx, "s1", ref, data); err != nil {
		t.Fatalf("Put again = %v, want nil (stored once)", err)
	}
	if got, err := b.Get(ctx, "s1", ref); err != nil || string(got) != string(data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if _, err := b.Get(ctx, "s2", ref); !errors.Is(err, sessions.ErrBlobNotFound) {
		t.Errorf("Get of another session's content = %v, want ErrBlobNotFound", err)
	}
	if err := b.Put(ctx, "s1", sessions.BlobRef([]byte("other")), data); err == nil {
		t.Error("Put under another content's ref succeeded")
	}
	// Drop removes a session's content and nothing else.
	if err := b.Drop(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "s1", ref); !errors.Is(err, sessions.ErrBlobNotFound) {
		t.Errorf("Get after Drop = %v, want ErrBlobNotFound", err)
	}
	if got, err := b.Get(ctx, "..", ref); err != nil || string(got) != string(data) {
		t.Errorf("Drop of s1 touched another session: %q, %v", got, err)
	}
	if err := b.Drop(ctx, "never"); err != nil {
		t.Errorf("Drop of a session without content = %v", err)
	}
}
