package runtime_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"svc/runner/runtime"
	"svc/runner/stores"
)

// The store routes read and write the records the store tools see.
func TestStoreRoutes(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk")})
	// A model writes a ticket through its tool.
	fs := e.chat("", map[string]any{"message": `/tool store__tickets__set {"customer_id": "acme", "number": 7, "status": "open", "subject": "VPN down"}`})
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "success" {
		t.Fatalf("set through the tool: %v", res)
	}
	r := e.do("GET", "/stores/tickets/acme-7", "", nil)
	if r.Status != http.StatusOK || r.JSON["key"] != "acme-7" || r.JSON["version"] != float64(1) || r.JSON["value"].(map[string]any)["subject"] != "VPN down" {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	r = e.do("PUT", "/stores/tickets/acme-7", "", map[string]any{"customer_id": "acme", "number": 7, "status": "closed"})
	if r.Status != http.StatusOK || r.JSON["version"] != float64(2) {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	if r := e.do("PUT", "/stores/tickets/acme-8", "", map[string]any{"customer_id": "acme", "number": 7}); r.Status != http.StatusBadRequest {
		t.Errorf("put with fields of another key: %d %s", r.Status, r.Body)
	}
	if r := e.do("PUT", "/stores/tickets/acme-7", "", map[string]any{"customer_id": "acme", "number": 7, "status": "done"}); r.Status != http.StatusBadRequest || r.JSON["field"] != "status" {
		t.Errorf("bad enum value: %d %s", r.Status, r.Body)
	}
	if r := e.do("PUT", "/stores/tickets/acme-7", "", map[string]any{"customer_id": "acme", "number": 7, "colour": "red"}); r.Status != http.StatusBadRequest || r.JSON["field"] != "colour" {
		t.Errorf("unknown field: %d %s", r.Status, r.Body)
	}
	r = e.do("GET", "/stores/tickets?limit=10", "", nil)
	items, _ := r.JSON["items"].([]any)
	if r.Status != http.StatusOK || len(items) != 1 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{"0", "501", "x"} {
		if r := e.do("GET", "/stores/tickets?limit="+bad, "", nil); r.Status != http.StatusBadRequest || r.JSON["field"] != "limit" {
			t.Errorf("limit=%s: %d %s", bad, r.Status, r.Body)
		}
	}
	if r := e.do("GET", "/stores/tickets?limit=500", "", nil); r.Status != http.StatusOK {
		t.Errorf("limit=500: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/stores/nope", "", nil); r.Status != http.StatusNotFound {
		t.Errorf("unknown store: %d %s", r.Status, r.Body)
	}
	if r := e.do("DELETE", "/stores/tickets/acme-7", "", nil); r.Status != http.StatusOK || r.JSON["deleted"] != true {
		t.Errorf("delete: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/stores/tickets/acme-7", "", nil); r.Status != http.StatusNotFound || !strings.Contains(str(r.JSON["message"]), "not found") {
		t.Errorf("get after delete: %d %s", r.Status, r.Body)
	}
	if r := e.do("DELETE", "/stores/tickets/acme-7", "", nil); r.Status != http.StatusOK || r.JSON["deleted"] != false {
		t.Errorf("second delete: %d %s", r.Status, r.Body)
	}
}

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
