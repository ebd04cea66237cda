package runtime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"svc/runner/runtime"
	"svc/runner/stores"
)

// An env: reference that is not set fails only what uses it: the runtime starts, the chat works,
// and the value set later applies to the next use.

// TestStoresOfAnUnsetURL: an agent whose stores.url is not set serves its chat; its store tools
// answer an error result that names the variable and how to set it, its store routes 503
// store_unavailable; once the variable is set, the next use works, on the same runtime.
func TestStoresOfAnUnsetURL(t *testing.T) {
	ag := loadAgent(t, "support-desk") // stores: sqlite at env:SUPPORT_DB_URL
	var mu sync.Mutex
	vars := map[string]string{}
	env := func(name string) (string, bool) { mu.Lock(); defer mu.Unlock(); v, ok := vars[name]; return v, ok }
	backend, err := stores.Open(context.Background(), stores.OpenParams{Config: ag.Config.Stores, AgentID: "a1", Env: env,
		Hint: func(name string) string { return "set it with `svc secrets set desk " + name + "`" }})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, runtime.Options{Agent: ag, Env: env, StoreBackend: backend})
	set := `/tool store__tickets__set {"customer_id": "acme", "number": 7, "status": "open"}`

	fs := e.chat("", map[string]any{"message": set})
	res := ofType(fs, "tool_call_result")
	const why = "env:SUPPORT_DB_URL is not set; set it with `svc secrets set desk SUPPORT_DB_URL`"
	if len(res) != 1 || res[0].Data["status"] != "error" || !strings.Contains(str(res[0].Data["error"]), why) {
		t.Fatalf("set without the url: %v, want an error result saying %q", res, why)
	}
	if done := ofType(fs, "done"); len(done) != 1 || done[0].Data["reason"] == "error" {
		t.Errorf("the chat did not end normally: %v", done)
	}
	r := e.do("GET", "/stores/tickets/acme-7", "", nil)
	if r.Status != http.StatusServiceUnavailable || r.JSON["error"] != runtime.CodeStoreDown || !strings.Contains(str(r.JSON["message"]), why) {
		t.Errorf("store route without the url: %d %s", r.Status, r.Body)
	}

	mu.Lock()
	vars["SUPPORT_DB_URL"] = filepath.Join(t.TempDir(), "desk.db")
	mu.Unlock()
	fs = e.chat("", map[string]any{"message": set})
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "success" {
		t.Fatalf("set once the url is set: %v", res)
	}
	if r := e.do("GET", "/stores/tickets/acme-7", "", nil); r.Status != http.StatusOK || r.JSON["version"] != float64(1) {
		t.Errorf("store route once the url is set: %d %s", r.Status, r.Body)
	}
}

// TestConnectionOfAnUnsetBaseURL: a connection whose baseUrl is an env: reference that is not
// set fails its calls alone, with an error result naming the variable and how to set it; the
// chat goes on, and the variable set later applies to the next call.
func TestConnectionOfAnUnsetBaseURL(t *testing.T) {
	var mu sync.Mutex
	vars := map[string]string{"STATUS_API_TOKEN": "tok-12345678"}
	env := func(name string) (string, bool) { mu.Lock(); defer mu.Unlock(); v, ok := vars[name]; return v, ok }
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Env: env,
		SecretHint: func(name string) string { return "set it with `svc secrets set desk " + name + "`" }})
	call := `/tool request {"connection": "status", "method": "GET", "path": "/incidents"}`
	fs := e.chat("", map[string]any{"message": call})
	res := ofType(fs, "tool_call_result")
	const why = "connection status: baseUrl: env:STATUS_API_URL is not set; set it with `svc secrets set desk STATUS_API_URL`"
	if len(res) != 1 || res[0].Data["status"] != "error" || !strings.Contains(str(res[0].Data["error"]), why) {
		t.Fatalf("request without the base URL: %v, want an error result saying %q", res, why)
	}
	if done := ofType(fs, "done"); len(done) != 1 || done[0].Data["reason"] == "error" {
		t.Errorf("the chat did not end normally: %v", done)
	}

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"incidents": []}`))
	}))
	defer api.Close()
	mu.Lock()
	vars["STATUS_API_URL"] = api.URL
	mu.Unlock()
	fs = e.chat("", map[string]any{"message": call})
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "success" {
		t.Fatalf("request once the base URL is set: %v", res)
	}
}
