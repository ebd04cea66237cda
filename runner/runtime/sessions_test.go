package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/runner/runtime"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/memstore"
)

func TestPreparedSession(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Now: clk.Now, IdleTimeout: 10 * time.Minute})
	r := e.do("POST", "/sessions", "", map[string]any{"skill": "refunds", "max_session_tokens": 100000, "scope_id": "t1",
		"context": map[string]string{"plan": "team"}, "model": map[string]any{"provider": "echo"}})
	if r.Status != http.StatusCreated || num(r.JSON["idle_ttl_ms"]) != 600000 {
		t.Fatalf("POST /sessions: %d %s", r.Status, r.Body)
	}
	id := str(r.JSON["session_id"])
	// Prepared, not persisted: the history list does not show it yet.
	if l := e.do("GET", "/sessions/history", "", nil); len(l.JSON["sessions"].([]any)) != 0 {
		t.Errorf("prepared session listed before its first turn: %s", l.Body)
	}
	// The first chat with that id skips setup: the prepared skill and scope apply, the
	// request's are ignored.
	fs := e.chat("", map[string]any{"message": "refund?", "session_id": id, "skill": "", "scope_id": "other"})
	if sessionOf(t, fs) != id || len(ofType(fs, "skill_activated")) != 1 {
		t.Fatalf("first turn: %v", types(fs))
	}
	h := e.do("GET", "/sessions/history/"+id, "", nil)
	if h.JSON["skill"] != "refunds" || h.JSON["scope_id"] != "t1" || num(h.JSON["max_session_tokens"]) != 100000 {
		t.Errorf("session = %s", h.Body)
	}
	if l := e.do("GET", "/sessions/history", "", nil); len(l.JSON["sessions"].([]any)) != 1 {
		t.Errorf("session not listed after its first turn: %s", l.Body)
	}
	if r := e.do("POST", "/sessions", "", map[string]any{"agent": "nobody"}); r.Status != 400 || r.JSON["field"] != "agent" {
		t.Errorf("bad agent: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/sessions", "", map[string]any{"metadata": metadataOf(51, 0, 0)}); r.Status != 400 || r.JSON["field"] != "metadata" {
		t.Errorf("51 metadata keys: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/sessions", "", nil); r.Status != http.StatusCreated {
		t.Errorf("empty body: %d %s", r.Status, r.Body)
	}
}

func TestIdleEviction(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	// A database store: the runtime keeps sessions live between requests (over an in-memory
	// store it does not, see TestInMemoryStoreKeepsNoLiveCopy).
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Now: clk.Now, Sessions: dbstore.New(dbtest.SQLite(t))})
	used := sessionOf(t, e.chat("", map[string]any{"message": "hi"}))
	prepared := str(e.do("POST", "/sessions", "", map[string]any{"skill": ""}).JSON["session_id"])
	if n := e.rt.LiveSessions(); n != 2 {
		t.Fatalf("live sessions = %d, want 2", n)
	}
	clk.Add(runtime.DefaultIdleTimeout - time.Second)
	if n := e.rt.EvictIdle(); n != 0 {
		t.Fatalf("evicted %d sessions before the idle timeout", n)
	}
	clk.Add(2 * time.Second)
	if n := e.rt.EvictIdle(); n != 2 || e.rt.LiveSessions() != 0 {
		t.Fatalf("evicted %d, %d live; want 2, 0", n, e.rt.LiveSessions())
	}
	// A stored session is reloaded on its next request.
	fs := e.chat("", map[string]any{"message": "back", "session_id": used})
	if sessionOf(t, fs) != used || text(fs) != "echo: back" {
		t.Errorf("reload: %v", types(fs))
	}
	if h := e.do("GET", "/sessions/history/"+used, "", nil); len(h.JSON["messages"].([]any)) != 4 {
		t.Errorf("history after reload: %s", h.Body)
	}
	// An unused prepared session expired.
	if r := e.do("GET", "/sessions/history/"+prepared, "", nil); r.Status != 404 {
		t.Errorf("expired prepared session: %d", r.Status)
	}
}

func TestInMemoryStoreKeepsNoLiveCopy(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	id := sessionOf(t, e.chat("", map[string]any{"message": "hi"}))
	e.do("POST", "/sessions", "", nil) // prepared sessions live in memory until their first turn
	if n := e.rt.LiveSessions(); n != 1 {
		t.Errorf("live sessions = %d, want 1 (the prepared one)", n)
	}
	if fs := e.chat("", map[string]any{"message": "again", "session_id": id}); sessionOf(t, fs) != id || text(fs) != "echo: again" {
		t.Errorf("resume: %v", types(fs))
	}
}

func TestPatchAndDelete(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	id := sessionOf(t, e.chat("", map[string]any{"message": "first line\nsecond", "metadata": map[string]string{"screen": "home"}}))
	h := e.do("GET", "/sessions/history/"+id, "", nil)
	if h.JSON["title"] != "first line" || h.JSON["status"] != "idle" || h.JSON["agent"] != "default" {
		t.Errorf("detail = %s", h.Body)
	}
	r := e.do("PATCH", "/sessions/history/"+id, "", map[string]any{"title": "Renamed", "metadata": map[string]string{"userId": "u9"}})
	if r.Status != 200 || r.JSON["title"] != "Renamed" {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	if m := r.JSON["metadata"].(map[string]any); m["screen"] != "home" || m["userId"] != "u9" {
		t.Errorf("metadata after patch = %v", m)
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"title": strings.Repeat("t", 201)}, "title"},
		{map[string]any{"metadata": metadataOf(1, 65, 0)}, "metadata"},
		{map[string]any{"metadata": metadataOf(49, 0, 0)}, "metadata"}, // 2 stored + 49 new = 51
	} {
		if r := e.do("PATCH", "/sessions/history/"+id, "", c.body); r.Status != 400 || r.JSON["field"] != c.field {
			t.Errorf("patch %v: %d %s", c.field, r.Status, r.Body)
		}
	}
	if r := e.do("PATCH", "/sessions/history/"+id, "", map[string]any{"title": strings.Repeat("t", 200)}); r.Status != 200 {
		t.Errorf("title of 200: %d", r.Status)
	}
	for _, p := range []string{"PATCH", "DELETE", "GET"} {
		if r := e.do(p, "/sessions/history/ses_nope", "", map[string]any{}); r.Status != 404 || r.JSON["error"] != "not_found" {
			t.Errorf("%s missing: %d %s", p, r.Status, r.Body)
		}
	}
	if r := e.do("DELETE", "/sessions/history/"+id, "", nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	if r := e.do("GET", "/sessions/history/"+id, "", nil); r.Status != 404 {
		t.Errorf("read after delete: %d", r.Status)
	}
	if r := e.do("DELETE", "/sessions/history/"+id, "", nil); r.Status != 404 {
		t.Errorf("second delete: %d", r.Status)
	}
}

func TestDatabaseSessionsSurviveRestart(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		store := dbstore.New(db)
		ag := loadAgent(t, "support-desk")
		first := start(t, runtime.Options{Agent: ag, AgentID: agentID, Sessions: store})
		fs := first.chat("", map[string]any{"message": `/tool load_skill {"name":"refunds"}`, "metadata": map[string]string{"userId": "u1"}})
		id := sessionOf(t, fs)
		first.srv.Close()
		if err := first.rt.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		// A new runtime over the same database resumes the session.
		second := start(t, runtime.Options{Agent: ag, AgentID: agentID, Sessions: store})
		fs = second.chat("", map[string]any{"message": "and now?", "session_id": id})
		if sessionOf(t, fs) != id || text(fs) != "echo: and now?" || len(ofType(fs, "warning")) != 0 {
			t.Fatalf("resume after restart: %v %q", types(fs), text(fs))
		}
		h := second.do("GET", "/sessions/history/"+id, "", nil)
		msgs := h.JSON["messages"].([]any)
		if len(msgs) != 6 {
			t.Fatalf("history after restart has %d messages, want 6: %s", len(msgs), h.Body)
		}
		if m := msgs[1].(map[string]any); m["role"] != "assistant" || len(m["tool_calls"].([]any)) != 1 {
			t.Errorf("tool call not kept: %v", m)
		}
		if h.JSON["metadata"].(map[string]any)["userId"] != "u1" {
			t.Errorf("metadata lost: %s", h.Body)
		}
		ctx := second.do("GET", "/inspect/context?session_id="+id, "", nil)
		if c := ctx.JSON["active_skills"].([]any); len(c) != 1 || c[0] != "refunds" {
			t.Errorf("active skills after restart: %s", ctx.Body)
		}
		if u := h.JSON["usage"].(map[string]any); num(u["total_tokens"]) == 0 {
			t.Errorf("usage not kept: %v", u)
		}
		// Another agent's runtime on the same database does not see it.
		third := start(t, runtime.Options{Agent: ag, AgentID: "ag_other", Sessions: store})
		if r := third.do("GET", "/sessions/history/"+id, "", nil); r.Status != 404 {
			t.Errorf("other agent reads the session: %d", r.Status)
		}
		if l := third.do("GET", "/sessions/history", "", nil); len(l.JSON["sessions"].([]any)) != 0 {
			t.Errorf("other agent lists the session: %s", l.Body)
		}
		// Chatting with that id on the other agent starts a fresh session and leaves this one alone.
		fs = third.chat("", map[string]any{"message": "mine now?", "session_id": id})
		if sessionOf(t, fs) == id {
			t.Errorf("another agent took over session %s", id)
		}
		if s, err := store.Load(t.Context(), id); err != nil || s.AgentID != agentID || len(s.Messages) != 6 {
			t.Errorf("stored session changed by another agent: %v", err)
		}
	})
}

// TestSharedStoreAcrossRuntimes alternates one session's turns between two runtimes of the same
// agent over one database (two deployments, or two runner processes): each turn sees the other's.
func TestSharedStoreAcrossRuntimes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		store := dbstore.New(db)
		a, b, _ := sharedPair(t, store, store, nil)
		id := sessionOf(t, a.chat("", map[string]any{"message": "one"}))
		b.chat("", map[string]any{"message": "two", "session_id": id})
		a.chat("", map[string]any{"message": "three", "session_id": id})
		if got := userTurns(b, id); got != "one,two,three" {
			t.Fatalf("user turns in the history = %q, want one,two,three (a runtime overwrote another's turn)", got)
		}
	})
}

// sharedPair starts two runtimes of the hello agent over one database (through storeA and
// storeB) as on the platform: a shared store and one turn lock, returned for tests to hold.
func sharedPair(t *testing.T, storeA, storeB sessions.Store, v runtime.Verifier) (a, b *env, locks *memstore.Locks) {
	t.Helper()
	locks = &memstore.Locks{}
	ag := loadAgent(t, "hello")
	a = start(t, runtime.Options{Agent: ag, AgentID: agentID, Sessions: storeA, Locker: locks, SharedStore: true, Verifier: v})
	b = start(t, runtime.Options{Agent: ag, AgentID: agentID, Sessions: storeB, Locker: locks, SharedStore: true, Verifier: v})
	return a, b, locks
}

// userTurns is the user messages of session id as e reads its history, joined by commas.
func userTurns(e *env, id string) string { return userTurnsAs(e, "", id) }

// userTurnsAs is userTurns with a bearer token.
func userTurnsAs(e *env, token, id string) string {
	h := e.do("GET", "/sessions/history/"+id, token, nil)
	var said []string
	msgs, _ := h.JSON["messages"].([]any)
	for _, m := range msgs {
		if msg := m.(map[string]any); msg["role"] == "user" {
			said = append(said, fmt.Sprint(msg["content"]))
		}
	}
	return strings.Join(said, ",")
}

// TestSharedStoreSeesOtherRuntimes: each runtime over a shared store sees the turns and the
// deletes of the others, and a chat with the id of a session deleted elsewhere starts anew.
func TestSharedStoreSeesOtherRuntimes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		store := dbstore.New(db)
		a, b, _ := sharedPair(t, store, store, nil)
		id := sessionOf(t, a.chat("", map[string]any{"message": "one"}))
		a.chat("", map[string]any{"message": "two", "session_id": id})
		b.chat("", map[string]any{"message": "three", "session_id": id})
		a.chat("", map[string]any{"message": "four", "session_id": id})
		if got := userTurns(a, id); got != "one,two,three,four" {
			t.Fatalf("user turns seen by runtime a = %q, want one,two,three,four", got)
		}
		if r := b.do("DELETE", "/sessions/history/"+id, "", nil); r.Status != http.StatusNoContent {
			t.Fatalf("DELETE on b: %d %s", r.Status, r.Body)
		}
		if r := a.do("GET", "/sessions/history/"+id, "", nil); r.Status != http.StatusNotFound {
			t.Fatalf("GET on a after b's delete: %d, want 404", r.Status)
		}
		if got := sessionOf(t, a.chat("", map[string]any{"message": "five", "session_id": id})); got != id {
			t.Fatalf("chat with a deleted session's id answered session %s, want %s anew", got, id)
		}
		if got := userTurns(b, id); got != "five" {
			t.Fatalf("history after a new start = %q, want five", got)
		}
	})
}

// TestSharedStoreRecreatedByAnotherUser: a session deleted on one runtime and created anew
// with the same id by another user is not resumed by its first owner on the other runtime:
// the owner gets a fresh session, and the new owner's history holds nothing of theirs.
func TestSharedStoreRecreatedByAnotherUser(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		sg := newSigner(t)
		store := dbstore.New(db)
		a, b, _ := sharedPair(t, store, store, sg.s)
		alice, mallory := sg.token(agentID, "alice", ""), sg.token(agentID, "mallory", "")
		const id = "ses_shared_recreated"
		a.chat(alice, map[string]any{"message": "alice one", "session_id": id})
		if r := b.do("DELETE", "/sessions/history/"+id, alice, nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		b.chat(mallory, map[string]any{"message": "mallory secret", "session_id": id})
		if got := sessionOf(t, a.chat(alice, map[string]any{"message": "alice two", "session_id": id})); got == id {
			t.Errorf("alice resumed %s, now mallory's session", id)
		}
		if got := userTurnsAs(b, mallory, id); got != "mallory secret" {
			t.Errorf("mallory's session holds %q, want only mallory secret", got)
		}
	})
}

// TestSharedStoreConcurrentTurns: clients of two runtimes race to chat on one session. The
// shared turn lock lets one turn in at a time (the others get 409 and try again), and every
// turn that ran is in the history exactly once, whichever runtime ran the one before it.
func TestSharedStoreConcurrentTurns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		store := dbstore.New(db)
		a, b, _ := sharedPair(t, store, store, nil)
		envs := []*env{a, b}
		id := sessionOf(t, envs[0].chat("", map[string]any{"message": "start"}))
		const workers, turns = 4, 5
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			e := envs[w%2]
			wg.Go(func() {
				for i := range turns {
					body, _ := json.Marshal(map[string]any{"message": fmt.Sprintf("m%d-%d", w, i), "session_id": id})
					for {
						resp, err := e.srv.Client().Post(e.url+"/chat/stream", "application/json", bytes.NewReader(body))
						if err != nil {
							errs <- err
							return
						}
						data, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusConflict {
							time.Sleep(time.Millisecond) // another turn runs: try again
							continue
						}
						if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte(`"reason":"model_stop"`)) {
							errs <- fmt.Errorf("turn %d-%d: status %d, %v: %s", w, i, resp.StatusCode, err, data)
							return
						}
						break
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		said := strings.Split(userTurns(envs[1], id), ",")
		want := []string{"start"}
		for w := range workers {
			for i := range turns {
				want = append(want, fmt.Sprintf("m%d-%d", w, i))
			}
		}
		slices.Sort(said)
		slices.Sort(want)
		if !slices.Equal(said, want) {
			t.Fatalf("user turns in the history:\n%v\nwant each of\n%v\nonce", said, want)
		}
	})
}

// TestSharedStorePreparedElsewhere: a session prepared on one runtime (POST /sessions) whose
// first turn ran on another is resumed, not overwritten, by the next turn on the first.
func TestSharedStorePreparedElsewhere(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		store := dbstore.New(db)
		a, b, _ := sharedPair(t, store, store, nil)
		id := str(a.do("POST", "/sessions", "", map[string]any{}).JSON["session_id"])
		b.chat("", map[string]any{"message": "on b", "session_id": id})
		if got := sessionOf(t, a.chat("", map[string]any{"message": "on a", "session_id": id})); got != id {
			t.Fatalf("turn on a answered session %s, want %s", got, id)
		}
		if got := userTurns(b, id); got != "on b,on a" {
			t.Fatalf("history = %q, want on b,on a", got)
		}
	})
}

// failFirstSave fails the first Save once armed.
type failFirstSave struct {
	*dbstore.Store
	armed atomic.Bool
}

func (f *failFirstSave) Save(ctx context.Context, s *sessions.Session, from int) error {
	if f.armed.CompareAndSwap(true, false) {
		return errors.New("transient store failure")
	}
	return f.Store.Save(ctx, s, from)
}

// TestSharedStoreLeftoverCopy: a session whose first turn failed to be stored on one runtime,
// then created by another user on another runtime, is not taken over by the first user.
func TestSharedStoreLeftoverCopy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		sg := newSigner(t)
		base := dbstore.New(db)
		failing := &failFirstSave{Store: base}
		a, b, _ := sharedPair(t, failing, base, sg.s)
		alice, mallory := sg.token(agentID, "alice", ""), sg.token(agentID, "mallory", "")
		const id = "ses_ticket_123"
		failing.armed.Store(true)
		if r := a.do("POST", "/chat/stream", mallory, map[string]any{"message": "m1", "session_id": id}); r.Status == http.StatusOK {
			t.Fatalf("first turn stored despite the failing store")
		}
		b.chat(alice, map[string]any{"message": "alice secret", "session_id": id})
		if got := sessionOf(t, a.chat(mallory, map[string]any{"message": "m2", "session_id": id})); got == id {
			t.Errorf("mallory resumed %s, alice's session", id)
		}
		if got := userTurnsAs(b, alice, id); got != "alice secret" {
			t.Errorf("alice sees %q, want alice secret", got)
		}
	})
}

// TestSharedStorePatchTakesTheTurnLock: on a shared store a PATCH waits for no turn of another
// runtime: it answers 409 while one runs, and otherwise changes the latest stored state (it
// never puts back usage from before another runtime's turn).
func TestSharedStorePatchTakesTheTurnLock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		store := dbstore.New(db)
		a, b, locks := sharedPair(t, store, store, nil)
		id := sessionOf(t, a.chat("", map[string]any{"message": "one"}))
		release, err := locks.TryLock(t.Context(), id) // a turn elsewhere
		if err != nil {
			t.Fatal(err)
		}
		if r := a.do("PATCH", "/sessions/history/"+id, "", map[string]any{"title": "renamed"}); r.Status != http.StatusConflict {
			t.Fatalf("PATCH during another runtime's turn: %d %s, want 409", r.Status, r.Body)
		}
		release()
		b.chat("", map[string]any{"message": "two", "session_id": id})
		want := b.do("GET", "/sessions/history/"+id, "", nil).JSON["usage"]
		r := a.do("PATCH", "/sessions/history/"+id, "", map[string]any{"title": "renamed"})
		if r.Status != http.StatusOK {
			t.Fatalf("PATCH: %d %s", r.Status, r.Body)
		}
		h := b.do("GET", "/sessions/history/"+id, "", nil)
		if fmt.Sprint(h.JSON["usage"]) != fmt.Sprint(want) || h.JSON["title"] != "renamed" || userTurns(b, id) != "one,two" {
			t.Fatalf("after PATCH: usage %v (want %v), title %v, turns %q", h.JSON["usage"], want, h.JSON["title"], userTurns(b, id))
		}
	})
}

// The history list filters on the metadata keys userId and screen.
func TestHistoryByMetadata(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	for id, meta := range map[string]map[string]string{
		"ses_m1": {"userId": "u1", "screen": "home"},
		"ses_m2": {"userId": "u2", "screen": "home"},
		"ses_m3": {"userId": "u1", "screen": "cart"},
	} {
		e.chat("", map[string]any{"message": "hi", "session_id": id, "metadata": meta})
	}
	ids := func(query string) []string {
		t.Helper()
		var out []string
		for _, it := range e.do("GET", "/sessions/history"+query, "", nil).JSON["sessions"].([]any) {
			out = append(out, str(it.(map[string]any)["session_id"]))
		}
		slices.Sort(out)
		return out
	}
	for query, want := range map[string][]string{
		"?userId=u1":             {"ses_m1", "ses_m3"},
		"?screen=home":           {"ses_m1", "ses_m2"},
		"?userId=u1&screen=cart": {"ses_m3"},
		"?userId=nobody":         nil,
	} {
		if got := ids(query); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", query, got, want)
		}
	}
}

// RunTurn runs a turn in process and returns its frames; the session is stored like any other.
func TestRunTurn(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk")})
	id, frames, err := e.rt.RunTurn(context.Background(), runtime.EvalTurn{Message: `/tool store__tickets__get {"key": "x"}`,
		Context: map[string]string{"plan": "pro"}, Metadata: map[string]string{"source": "eval"}, MaxSessionTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, f := range frames {
		types = append(types, string(f.Type))
	}
	if len(frames) == 0 || frames[0].Type != "init" || frames[len(frames)-1].Type != "done" || !slices.Contains(types, "tool_call_result") {
		t.Fatalf("frames %v", types)
	}
	h := e.do("GET", "/sessions/history/"+id, "", nil)
	if h.Status != 200 || h.JSON["metadata"].(map[string]any)["source"] != "eval" {
		t.Errorf("history of %s: %d %s", id, h.Status, h.Body)
	}
	if _, _, err := e.rt.RunTurn(context.Background(), runtime.EvalTurn{}); err == nil {
		t.Error("an empty message ran")
	}
}
