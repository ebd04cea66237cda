package runtime_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/runtime"
)

// An inline handler of svc/tools runs as a tool of the turn: its result, its logs as tool_log,
// a throw as an error naming the handler.ts line, and requiresConfirmation through approvals.
func TestHandlerTools(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"svc.json":                  `{"name": "calc", "version": "1"}`,
		"svc/tools/add/tool.json":   `{"name": "add", "description": "Adds.", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}`,
		"svc/tools/add/handler.ts":  "export default async function (p: {a: number, b: number}, ctx: any) {\n  console.log(`adding ${p.a} and ${p.b}`);\n  if (p.a < 0) {\n    throw new Error(\"a must not be negative\");\n  }\n  return { sum: p.a + p.b };\n}\n",
		"svc/tools/wipe/tool.json":  `{"name": "wipe", "parameters": {"type": "object"}, "requiresConfirmation": true}`,
		"svc/tools/wipe/handler.ts": "export default function () {\n  return \"wiped\";\n}\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, runtime.Options{Agent: ag, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})

	fs := e.chat("", map[string]any{"message": `/tool add {"a": 2, "b": 3}`})
	res := ofType(fs, "tool_call_result")
	logs := ofType(fs, "tool_log")
	if len(res) != 1 || res[0].Data["status"] != "success" || res[0].Data["result"].(map[string]any)["sum"] != float64(5) {
		t.Fatalf("add: %v", res)
	}
	if len(logs) != 1 || logs[0].Data["message"] != "adding 2 and 3" || logs[0].Data["tool_name"] != "add" {
		t.Errorf("tool_log %v", logs)
	}
	fs = e.chat("", map[string]any{"message": `/tool add {"a": -1, "b": 3}`})
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "error" ||
		!strings.Contains(str(res[0].Data["error"]), "handler.ts:4") || !strings.Contains(str(res[0].Data["error"]), "a must not be negative") {
		t.Errorf("throw: %v", res)
	}
	// requiresConfirmation: the call waits for the user.
	s := e.open(t, map[string]any{"message": `/tool wipe {}`, "session_id": "ses_wipe"})
	c := s.until("confirmation_required").Data
	if c["tool_name"] != "wipe" || c["method"] != "CALL" {
		t.Errorf("confirmation_required %v", c)
	}
	if r := e.answer("ses_wipe", str(c["correlation_id"]), true); r.Status != http.StatusOK {
		t.Fatal(r.Status, string(r.Body))
	}
	if res := s.until("tool_call_result").Data; res["status"] != "success" || res["content"] != "wiped" {
		t.Errorf("wipe: %v", res)
	}
	s.until("done")
}
