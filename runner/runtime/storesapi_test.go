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
