package runtime_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"svc/agent"
	"svc/auth"
	"svc/runner/runtime"
	"svc/runner/sessions"
	"svc/runner/sessions/memstore"
)

const agentID = "ag_test"

func TestRuntimeAuth(t *testing.T) {
	sg := newSigner(t)
	keys := newKeys(t)
	key, otherKey, revokedKey := keys.create(t, agentID), keys.create(t, "ag_other"), keys.create(t, agentID)
	keys.revoke(t, revokedKey)
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, Verifier: sg.s, Keys: keys.checker})
	expired, err := sg.s.Mint(auth.RuntimeClaims{AgentID: agentID, UserID: "u", ExpiresAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	other := newSigner(t)
	other.s, _ = auth.NewSigner([]byte("another-key-another-key-another-key"))
	cases := []struct {
		name    string
		token   string
		status  int
		code    string
		message string // a part of the message, when it must say something in particular
	}{
		{"no token", "", 401, "unauthenticated", "Bearer"},
		{"garbage", "not-a-jwt", 401, "unauthenticated", "missing or invalid"},
		{"platform token", "pk_abcdefghijklmnopqrstuvwxyz", 401, "unauthenticated", "pk_ platform token"},
		{"unknown agent key", "ak_abcdefghijklmnopqrstuvwxyz", 401, "unauthenticated", "unknown or revoked API key"},
		{"another agent's key", otherKey, 401, "unauthenticated", "unknown or revoked API key"},
		{"revoked key", revokedKey, 401, "unauthenticated", "unknown or revoked API key"},
		{"expired", expired, 401, "unauthenticated", "the runtime token expired at "},
		{"wrong key", other.token(agentID, "u", ""), 401, "unauthenticated", "missing or invalid"},
		{"other agent", sg.token("ag_other", "u", ""), 403, "forbidden", ""},
		{"valid", sg.token(agentID, "u", ""), 200, "", ""},
		{"agent key", key, 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, route := range []struct{ method, path string }{
				{"POST", "/chat/stream"}, {"POST", "/chat/sync"}, {"POST", "/chat/ai-stream"}, {"GET", "/sessions/history"},
				{"POST", "/sessions"}, {"GET", "/inspect/context"}, {"GET", "/sessions/history/x"},
			} {
				r := e.do(route.method, route.path, c.token, map[string]any{"message": "hi"})
				want := c.status
				if want == 200 && route.path == "/sessions" {
					want = 201
				}
				if want == 200 && route.path == "/sessions/history/x" {
					want = 404
				}
				if want == 200 && route.path == "/inspect/context" && c.token != key {
					want = 403 // a verified user's token: inspecting is for trusted callers
				}
				if r.Status != want {
					t.Errorf("%s %s: status %d, want %d: %s", route.method, route.path, r.Status, want, r.Body)
				}
				if c.code != "" && r.JSON["error"] != c.code {
					t.Errorf("%s %s: body %s, want error %s", route.method, route.path, r.Body, c.code)
				}
				if msg, _ := r.JSON["message"].(string); !strings.Contains(msg, c.message) {
					t.Errorf("%s %s: message %q, want it to say %q", route.method, route.path, msg, c.message)
				}
			}
		})
	}
	if r := e.do("GET", "/health", "", nil); r.Status != 200 {
		t.Errorf("/health needs no token: %d", r.Status)
	}
	// A trusted caller (a token minted without a user) may inspect; a user's token may not.
	for path, want := range map[string]int{"/inspect/context": 200, "/inspect/connections/none": 404} {
		if r := e.do("GET", path, sg.token(agentID, "", ""), nil); r.Status != want {
			t.Errorf("%s with a trusted token = %d, want %d: %s", path, r.Status, want, r.Body)
		}
		if r := e.do("GET", path, sg.token(agentID, "u", ""), nil); r.Status != 403 || r.JSON["error"] != "forbidden" {
			t.Errorf("%s with a user's token = %d %s, want 403", path, r.Status, r.Body)
		}
	}
}

func TestAuthTokenMode(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AuthToken: "dev-secret"})
	if r := e.do("POST", "/chat/sync", "dev-secret", map[string]any{"message": "hi"}); r.Status != 200 {
		t.Errorf("AUTH_TOKEN: %d %s", r.Status, r.Body)
	}
	for _, tok := range []string{"", "wrong", "pk_x"} {
		if r := e.do("POST", "/chat/sync", tok, map[string]any{"message": "hi"}); r.Status != 401 {
			t.Errorf("token %q: %d", tok, r.Status)
		}
	}
	if r := e.do("GET", "/health", "", nil); r.Status != 200 {
		t.Errorf("/health: %d", r.Status)
	}
}

// TestTenancyTable is spec §4.6 as a table: who made the session (its owner and scope) ×
// who asks (token user and scope claim) × what they do → the outcome.
func TestTenancyTable(t *testing.T) {
	sg := newSigner(t)
	type who struct{ user, scope string }
	const (
		same  = "resumed" // chat resumes the session
		fresh = "fresh"   // chat starts a fresh session instead
		ok    = "ok"      // read 200, update 200, delete 204
		gone  = "404"     // read, update, delete answer 404
	)
	cases := []struct {
		name    string
		creator who // token that created the session (user "" = service token)
		caller  who
		resume  string
		access  string
	}{
		{"owner itself", who{"u1", ""}, who{"u1", ""}, same, ok},
		{"another user", who{"u1", ""}, who{"u2", ""}, fresh, gone},
		{"service caller on owned session", who{"u1", ""}, who{"", ""}, same, ok},
		{"user on shared session", who{"", ""}, who{"u2", ""}, same, ok},
		{"service on shared session", who{"", ""}, who{"", ""}, same, ok},
		{"same scope claim, same user", who{"u1", "t1"}, who{"u1", "t1"}, same, ok},
		{"same scope claim, other user", who{"u1", "t1"}, who{"u2", "t1"}, fresh, gone},
		{"other scope claim", who{"", "t1"}, who{"", "t2"}, fresh, gone},
		{"other scope claim, same user", who{"u1", "t1"}, who{"u1", "t2"}, fresh, gone},
		{"scope claim on unscoped session", who{"", ""}, who{"", "t1"}, fresh, gone},
		{"no claim on scoped session", who{"", "t1"}, who{"u2", ""}, same, ok},
		{"no claim, owner, scoped session", who{"u1", "t1"}, who{"u1", ""}, same, ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, Verifier: sg.s})
			creator := sg.token(agentID, c.creator.user, c.creator.scope)
			caller := sg.token(agentID, c.caller.user, c.caller.scope)
			id := sessionOf(t, e.chat(creator, map[string]any{"message": "first"}))

			// resume
			got := sessionOf(t, e.chat(caller, map[string]any{"message": "second", "session_id": id}))
			switch {
			case c.resume == same && got != id:
				t.Errorf("resume: got session %s, want %s", got, id)
			case c.resume == fresh && got == id:
				t.Errorf("resume: reused session %s, want a fresh one", id)
			}
			if c.resume == fresh {
				// The creator's session is untouched.
				h := e.do("GET", "/sessions/history/"+id, creator, nil)
				if n := len(h.JSON["messages"].([]any)); n != 2 {
					t.Errorf("creator's session has %d messages after a refused resume, want 2", n)
				}
			}
			// read, update, delete
			want := map[string]int{"read": 200, "update": 200, "delete": 204}
			if c.access == gone {
				want = map[string]int{"read": 404, "update": 404, "delete": 404}
			}
			if r := e.do("GET", "/sessions/history/"+id, caller, nil); r.Status != want["read"] {
				t.Errorf("read: %d, want %d", r.Status, want["read"])
			}
			if r := e.do("PATCH", "/sessions/history/"+id, caller, map[string]any{"title": "renamed"}); r.Status != want["update"] {
				t.Errorf("update: %d, want %d", r.Status, want["update"])
			}
			if r := e.do("DELETE", "/sessions/history/"+id, caller, nil); r.Status != want["delete"] {
				t.Errorf("delete: %d, want %d", r.Status, want["delete"])
			}
			// A hidden session looks exactly like a missing one.
			if c.access == gone {
				hidden := e.do("GET", "/sessions/history/"+id, caller, nil)
				missing := e.do("GET", "/sessions/history/ses_missing", caller, nil)
				if string(hidden.Body) != string(missing.Body) {
					t.Errorf("hidden %s differs from missing %s", hidden.Body, missing.Body)
				}
				if r := e.do("GET", "/sessions/history/"+id, creator, nil); r.Status != 200 {
					t.Errorf("creator lost access: %d", r.Status)
				}
			}
		})
	}
}

func TestScopeClaimOverridesRequest(t *testing.T) {
	sg := newSigner(t)
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, Verifier: sg.s})
	tok := sg.token(agentID, "u1", "t1")
	id := sessionOf(t, e.chat(tok, map[string]any{"message": "hi", "scope_id": "t2"}))
	h := e.do("GET", "/sessions/history/"+id, tok, nil)
	if h.JSON["scope_id"] != "t1" || h.JSON["owner"] != "u1" {
		t.Errorf("session = %s, want scope t1 (the claim) and owner u1", h.Body)
	}
	// Without a claim, the request's scope applies.
	svc := sg.token(agentID, "", "")
	id = sessionOf(t, e.chat(svc, map[string]any{"message": "hi", "scope_id": "t2"}))
	if h := e.do("GET", "/sessions/history/"+id, svc, nil); h.JSON["scope_id"] != "t2" || h.JSON["owner"] != "" {
		t.Errorf("session = %s", h.Body)
	}
	// The same scope without session_id starts another conversation.
	id2 := sessionOf(t, e.chat(svc, map[string]any{"message": "hi", "scope_id": "t2"}))
	if id2 == id {
		t.Error("same scope without session_id reused the session")
	}
}

func TestHistoryListFiltering(t *testing.T) {
	sg := newSigner(t)
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, Verifier: sg.s})
	u1t1 := sg.token(agentID, "u1", "t1")
	u1 := sg.token(agentID, "u1", "")
	u2 := sg.token(agentID, "u2", "")
	svc := sg.token(agentID, "", "")
	e.chat(u1t1, map[string]any{"message": "a"})
	e.chat(u1, map[string]any{"message": "b", "scope_id": "t2"})
	e.chat(u2, map[string]any{"message": "c", "scope_id": "t1"})
	e.chat(svc, map[string]any{"message": "d"})
	titles := func(tok, query string) []string {
		r := e.do("GET", "/sessions/history"+query, tok, nil)
		if r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		var out []string
		for _, it := range r.JSON["sessions"].([]any) {
			m := it.(map[string]any)
			for _, k := range []string{"session_id", "title", "scope_id", "agent", "skill", "owner", "status", "created_at", "updated_at", "metadata"} {
				if _, ok := m[k]; !ok {
					t.Errorf("list item lacks %q: %v", k, m)
				}
			}
			out = append(out, str(m["title"]))
		}
		return out
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	check("u1 with claim t1", titles(u1t1, ""), "a")
	check("u1 with claim t1 asking t2", titles(u1t1, "?scope_id=t2"), "a") // the claim wins
	check("u1", titles(u1, ""), "d", "b", "a")
	check("u1 filtering t1", titles(u1, "?scope_id=t1"), "a")
	check("u2", titles(u2, ""), "d", "c")
	check("service", titles(svc, ""), "d", "c", "b", "a")
}

func TestHistoryListFiltersAfter500Rows(t *testing.T) {
	sg := newSigner(t)
	store := memstore.New()
	now := time.Now()
	// The newest 500 sessions belong to u2; u1's session is the 501st.
	for i := range 501 {
		s := &sessions.Session{ID: fmt.Sprintf("s%03d", i), AgentID: agentID, Owner: "u2", Title: "x", Status: sessions.StatusIdle,
			CreatedAt: now, UpdatedAt: now.Add(time.Duration(i) * time.Second)}
		if i == 0 {
			s.Owner = "u1"
		}
		if err := store.Save(t.Context(), s, 0); err != nil {
			t.Fatal(err)
		}
	}
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, Verifier: sg.s, Sessions: store})
	r := e.do("GET", "/sessions/history", sg.token(agentID, "u1", ""), nil)
	if n := len(r.JSON["sessions"].([]any)); n != 0 {
		t.Errorf("u1 sees %d sessions; the list filters after fetching 500 rows, so it sees none", n)
	}
	r = e.do("GET", "/sessions/history", sg.token(agentID, "", ""), nil)
	if n := len(r.JSON["sessions"].([]any)); n != 500 {
		t.Errorf("service sees %d sessions, want 500", n)
	}
	if r := e.do("GET", "/sessions/history/s000", sg.token(agentID, "u1", ""), nil); r.Status != http.StatusOK {
		t.Errorf("u1 can still read its session: %d", r.Status)
	}
}

// TestRequireScopeOnLocalRoutes: spec 5.5, local chat applies svc.json's scope.requireScope;
// hosted chat (runtime tokens) does not.
func TestRequireScopeOnLocalRoutes(t *testing.T) {
	ag := loadAgent(t, "hello")
	ag.Config.Scope = &agent.ScopeConfig{RequireScope: true}
	local := start(t, runtime.Options{Agent: ag})
	if r := local.do("POST", "/chat/sync", "", map[string]any{"message": "hi"}); r.Status != 400 || !strings.Contains(string(r.Body), "scope_id") {
		t.Fatalf("local chat without scope_id = %d %s, want 400 naming scope_id", r.Status, r.Body)
	}
	if r := local.do("POST", "/sessions", "", map[string]any{}); r.Status != 400 {
		t.Fatalf("local POST /sessions without scope_id = %d, want 400", r.Status)
	}
	if r := local.do("POST", "/chat/sync", "", map[string]any{"message": "hi", "scope_id": "tenant-1"}); r.Status != 200 {
		t.Fatalf("local chat with scope_id = %d %s", r.Status, r.Body)
	}
	signer, err := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	hosted := start(t, runtime.Options{Agent: ag, AgentID: agentID, Verifier: signer})
	tok, err := signer.Mint(auth.RuntimeClaims{AgentID: agentID, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if r := hosted.do("POST", "/chat/sync", tok, map[string]any{"message": "hi"}); r.Status != 200 {
		t.Fatalf("hosted chat without scope_id = %d %s, want 200 (not enforced)", r.Status, r.Body)
	}
}

// TestCrossOrigin: a page of another origin can call the runtime with a bearer token: the
// preflight is answered without one, and answers allow any origin (no cookies are ever used).
func TestCrossOrigin(t *testing.T) {
	sg := newSigner(t)
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, Verifier: sg.s})
	req := e.request("OPTIONS", "/chat/stream", "", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight = %d %v", resp.StatusCode, h)
	}
	r := e.do("POST", "/chat/sync", sg.token(agentID, "u", ""), map[string]any{"message": "hi"})
	if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("chat = %d %v", r.Status, r.Header)
	}
}
