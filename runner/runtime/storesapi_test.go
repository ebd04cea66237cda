package runtime_test

import (
	"net/http"
	"strings"
	"testing"

	"svc/runner/runtime"
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

// A store with "trace": true shows who wrote each version ({session_id, tool_call_id, at}) in
// the history tool's result and on GET /stores/{store}/{key}/history, which takes the store
// routes' credentials: another agent's token is refused, as is an unknown key or store.
func TestStoreHistoryTraces(t *testing.T) {
	sg := newSigner(t)
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), AgentID: "ag_desk", Verifier: sg.s})
	tok := sg.token("ag_desk", "", "")
	fs := e.chat(tok, map[string]any{"message": `/tool store__tickets__set {"customer_id": "acme", "number": 7, "status": "open"}`})
	session, call := sessionOf(t, fs), str(ofType(fs, "tool_call_start")[0].Data["tool_id"])
	if r := e.do("PUT", "/stores/tickets/acme-7", tok, map[string]any{"customer_id": "acme", "number": 7, "status": "closed"}); r.Status != http.StatusOK {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	check := func(what string, h map[string]any) {
		t.Helper()
		vs, _ := h["versions"].([]any)
		if h["key"] != "acme-7" || len(vs) != 2 {
			t.Fatalf("%s: %v", what, h)
		}
		v2, v1 := vs[0].(map[string]any), vs[1].(map[string]any)
		if v2["version"] != float64(2) || v2["trace"] != nil { // the route's write names no call
			t.Errorf("%s: version 2 %v", what, v2)
		}
		tr, _ := v1["trace"].(map[string]any)
		if v1["version"] != float64(1) || tr["session_id"] != session || tr["tool_call_id"] != call || tr["at"] != v1["updated_at"] || str(tr["at"]) == "" {
			t.Errorf("%s: version 1 %v, want the trace of session %s call %s", what, v1, session, call)
		}
	}
	fs = e.chat(tok, map[string]any{"message": `/tool store__tickets__history {"key": "acme-7"}`})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 || res[0].Data["status"] != "success" {
		t.Fatalf("history tool: %v", res)
	}
	check("tool", res[0].Data["result"].(map[string]any))
	r := e.do("GET", "/stores/tickets/acme-7/history", tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("history route: %d %s", r.Status, r.Body)
	}
	check("route", r.JSON)
	if r := e.do("GET", "/stores/tickets/acme-7/history?limit=1", tok, nil); r.Status != http.StatusOK || len(r.JSON["versions"].([]any)) != 1 {
		t.Errorf("limit=1: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{"0", "501", "x"} {
		if r := e.do("GET", "/stores/tickets/acme-7/history?limit="+bad, tok, nil); r.Status != http.StatusBadRequest || r.JSON["field"] != "limit" {
			t.Errorf("limit=%s: %d %s", bad, r.Status, r.Body)
		}
	}
	// Refusals.
	if r := e.do("GET", "/stores/tickets/acme-7/history", "", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("no credential: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/stores/tickets/acme-7/history", sg.token("ag_other", "", ""), nil); r.Status != http.StatusForbidden {
		t.Errorf("another agent's token: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/stores/tickets/acme-8/history", tok, nil); r.Status != http.StatusNotFound || !strings.Contains(str(r.JSON["message"]), "acme-8") {
		t.Errorf("unknown key: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/stores/nope/acme-7/history", tok, nil); r.Status != http.StatusNotFound {
		t.Errorf("unknown store: %d %s", r.Status, r.Body)
	}
}
