package runtime_test

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
)

// An inline handler of svc/tools runs as a tool of the turn: its result, its logs as tool_log,
// a throw as an error naming the handler.ts line, and requiresConfirmation through approvals.
func TestHandlerTools(t *testing.T) {
	dir := agenttest.Write(t, map[string]string{
		"svc.json":                    `{"name": "calc", "version": "1"}`,
		"svc/tools/add/tool.json":     `{"name": "add", "description": "Adds.", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}`,
		"svc/tools/add/handler.ts":    "export default async function (p: {a: number, b: number}, ctx: any) {\n  console.log(`adding ${p.a} and ${p.b}`);\n  if (p.a < 0) {\n    throw new Error(\"a must not be negative\");\n  }\n  return { sum: p.a + p.b };\n}\n",
		"svc/tools/wipe/tool.json":    `{"name": "wipe", "parameters": {"type": "object"}, "requiresConfirmation": true}`,
		"svc/tools/wipe/handler.ts":   "export default function () {\n  return \"wiped\";\n}\n",
		"svc/tools/double/tool.json":  `{"name": "double", "parameters": {"type": "object"}, "uses": {"tools": ["add", "wipe"]}}`,
		"svc/tools/double/handler.ts": "export default async function (p: any, ctx: any) {\n  if (p.wipe) { return await ctx.callTool(\"wipe\", {}); }\n  if (p.other) { return await ctx.callTool(\"store__x__get\", {}); }\n  const r = await ctx.callTool(\"add\", { a: p.n, b: p.n });\n  return { double: r.sum };\n}\n",
		"svc/tools/deep1/tool.json":   `{"name": "deep1", "parameters": {"type": "object"}, "uses": {"tools": ["deep2"]}}`,
		"svc/tools/deep1/handler.ts":  "export default async function (p: any, ctx: any) { return await ctx.callTool(\"deep2\", {}); }\n",
		"svc/tools/deep2/tool.json":   `{"name": "deep2", "parameters": {"type": "object"}, "uses": {"tools": ["deep3"]}}`,
		"svc/tools/deep2/handler.ts":  "export default async function (p: any, ctx: any) { return await ctx.callTool(\"deep3\", {}); }\n",
		"svc/tools/twice/tool.json":   `{"name": "twice", "parameters": {"type": "object"}, "uses": {"tools": ["add"]}}`,
		"svc/tools/twice/handler.ts":  "export default async function (p: any, ctx: any) {\n  await ctx.callTool(\"add\", { a: 1, b: 1 });\n  return await ctx.callTool(\"add\", { a: 2, b: 2 });\n}\n",
		"svc/tools/files/tool.json":   `{"name": "files", "parameters": {"type": "object"}}`,
		"svc/tools/files/handler.ts":  "export default function (p: any, ctx: any) {\n  return ctx.attachments.map((a: any) => `${a.filename}|${a.mimeType}|${a.delivery}|${a.size}|${a.text}`);\n}\n",
		"svc/tools/deep3/tool.json":   `{"name": "deep3", "parameters": {"type": "object"}}`,
		"svc/tools/deep3/handler.ts":  "export default function () { return \"bottom\"; }\n",
	})
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, runtime.Options{Agent: ag, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}, CompositeMaxDepth: 2})

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

	// A composite calls its declared children and gets their results; it may not call an
	// undeclared tool, nor one that asks the user first; nesting is bounded.
	result := func(msg string) map[string]any {
		t.Helper()
		res := ofType(topLevel(e.chat("", map[string]any{"message": msg})), "tool_call_result")
		if len(res) != 1 {
			t.Fatalf("%s: %d results", msg, len(res))
		}
		return res[0].Data
	}
	if r := result(`/tool double {"n": 4}`); r["status"] != "success" || r["result"].(map[string]any)["double"] != float64(8) {
		t.Errorf("double: %v", r)
	}
	if r := result(`/tool double {"other": true}`); r["status"] != "error" || !strings.Contains(str(r["error"]), `store__x__get") is not allowed: store__x__get is not in uses.tools of double`) {
		t.Errorf("undeclared child: %v", r)
	}
	if r := result(`/tool double {"wipe": true}`); r["status"] != "error" || !strings.Contains(str(r["error"]), "asks the user first") {
		t.Errorf("child asking for approval: %v", r)
	}
	if r := result(`/tool deep1 {}`); r["status"] != "error" || !strings.Contains(str(r["error"]), "over the limit of 2 (SVC_COMPOSITE_MAX_DEPTH)") {
		t.Errorf("nesting: %v", r)
	}

	// The calls tools make to tools in one turn are bounded: two pass a limit of two, not of one.
	for limit, ok := range map[int]bool{1: false, 2: true} {
		e := start(t, runtime.Options{Agent: ag, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}, CompositeMaxCalls: limit})
		res := ofType(topLevel(e.chat("", map[string]any{"message": `/tool twice {}`})), "tool_call_result")
		if got := len(res) == 1 && res[0].Data["status"] == "success"; got != ok {
			t.Errorf("limit %d: %v", limit, res)
		}
		if !ok && !strings.Contains(str(res[0].Data["error"]), "over the limit of 1 tool calls by tools in one turn (SVC_COMPOSITE_MAX_CALLS)") {
			t.Errorf("limit %d: error %v", limit, res[0].Data["error"])
		}
	}

	// ctx.attachments holds the turn's files, those kept for tools (delivery context) too.
	model := modelstest.NewOpenAIServer(t, modelstest.Turn{ToolCalls: []modelstest.ToolCall{{ID: "f1", Name: "files", Arguments: `{}`}}}, modelstest.Turn{Text: []string{"ok"}})
	e = start(t, runtime.Options{Agent: ag, Models: openaiModels(model), DefaultModel: agent.ModelRef{Provider: "openai", Model: "m"}})
	fs = e.chat("", map[string]any{"message": "what did I send?", "attachments": []any{
		map[string]any{"mimeType": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte("hello")), "filename": "a.txt"},
		map[string]any{"mimeType": "text/csv", "data": base64.StdEncoding.EncodeToString([]byte("x,y\n1,2")), "filename": "b.csv", "delivery": "context"},
	}})
	res = ofType(fs, "tool_call_result")
	want := []any{"a.txt|text/plain|inline|5|hello", "b.csv|text/csv|context|7|x,y\n1,2"}
	if len(res) != 1 || !slices.Equal(res[0].Data["result"].([]any), want) {
		t.Errorf("ctx.attachments: %v", res)
	}
}

// ctx.callSubagent's opts.attachments puts the turn's files on the specialist's message.
func TestSubagentAttachments(t *testing.T) {
	dir := agenttest.Write(t, map[string]string{
		"svc.json":                  `{"name": "sub", "version": "1"}`,
		"agents/default/AGENT.md":   "You are the desk.",
		"agents/default/agent.json": `{"name": "default", "tools": ["ask"]}`,
		"agents/reader/AGENT.md":    "You read files.",
		"svc/tools/ask/tool.json":   `{"name": "ask", "parameters": {"type": "object"}, "uses": {"subagents": ["reader"]}}`,
		"svc/tools/ask/handler.ts":  "export default async function (p: any, ctx: any) {\n  return await ctx.callSubagent(\"reader\", \"Summarise the file.\", undefined, { attachments: [p.file] });\n}\n",
	})
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	model := modelstest.NewOpenAIServer(t,
		modelstest.Turn{ToolCalls: []modelstest.ToolCall{{ID: "a1", Name: "ask", Arguments: `{"file": "notes.txt"}`}}},
		modelstest.Turn{Text: []string{"It says hello."}},
		modelstest.Turn{Text: []string{"done"}})
	e := start(t, runtime.Options{Agent: ag, Models: openaiModels(model), DefaultModel: agent.ModelRef{Provider: "openai", Model: "m"}})
	fs := e.chat("", map[string]any{"message": "read my notes", "attachments": []any{
		map[string]any{"mimeType": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte("hello from the notes")), "filename": "notes.txt", "delivery": "context"},
	}})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 || res[0].Data["status"] != "success" || res[0].Data["content"] != "It says hello." {
		t.Fatalf("ask: %v", res)
	}
	reqs := model.Requests()
	if len(reqs) < 2 || !strings.Contains(string(reqs[1].Body), "hello from the notes") {
		t.Errorf("the specialist's request lacks the file: %d requests", len(reqs))
	}
	if strings.Contains(string(reqs[0].Body), "hello from the notes") {
		t.Errorf("a context file reached the top-level model")
	}
}

// A handler that recurses through subagents (a tool that asks a specialist whose model calls the
// same tool again) stops at the depth bound: the innermost call fails naming the limit, and that
// error goes back up as the specialists' answers (spec 4.7 rules 2, 3).
func TestSubagentRecursionIsBounded(t *testing.T) {
	dir := agenttest.Write(t, map[string]string{
		"svc.json":                     `{"name": "rec", "version": "1", "models": {"main": {"provider": "echo", "model": "echo"}}}`,
		"agents/default/AGENT.md":      "You are the desk.",
		"agents/default/agent.json":    `{"name": "default", "tools": ["recurse"]}`,
		"agents/loop/AGENT.md":         "You loop.",
		"agents/loop/agent.json":       `{"name": "loop", "tools": ["recurse"]}`,
		"svc/tools/recurse/tool.json":  `{"name": "recurse", "parameters": {"type": "object"}, "uses": {"subagents": ["loop"]}}`,
		"svc/tools/recurse/handler.ts": "export default async function (p: any, ctx: any) {\n  return await ctx.callSubagent(\"loop\", \"/tool recurse {}\");\n}\n",
	})
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, runtime.Options{Agent: ag, CompositeMaxDepth: 3})
	fs := e.chat("", map[string]any{"message": `/tool recurse {}`})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 || !strings.Contains(str(res[0].Data["content"]), "(SVC_COMPOSITE_MAX_DEPTH)") {
		t.Fatalf("result %v", res)
	}
	if n := len(ofType(fs, "subagent_event")); n == 0 {
		t.Errorf("no subagent_event frames")
	}
	if d := done(t, fs); d["reason"] != "model_stop" {
		t.Errorf("done %v", d)
	}
}

// A tool manifest alone exposes no route, schedule or webhook (spec 4.7 rule 10): tools run only
// when a model (or a handler) calls them.
func TestToolsExposeNoRoutes(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk")})
	for _, path := range []string{"/tools/refund_request", "/refund_request", "/api/tools/triage", "/webhooks/refund_request"} {
		if r := e.do("POST", path, "", map[string]any{}); r.Status != 404 {
			t.Errorf("POST %s = %d %s", path, r.Status, r.Body)
		}
	}
}
