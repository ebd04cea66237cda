package runtime_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/models"
	"svc/runner/runtime"
)

// cardsAgent has a composite calling a composite calling a tool: three levels of cards.
func cardsAgent(t *testing.T) *agent.Agent {
	t.Helper()
	dir := agenttest.Write(t, map[string]string{
		"svc.json":                    `{"name": "cards", "version": "1"}`,
		"svc/tools/outer/tool.json":   `{"name": "outer", "parameters": {"type": "object"}, "uses": {"tools": ["middle"]}}`,
		"svc/tools/outer/handler.ts":  "export default async function (p: any, ctx: any) {\n  const r = await ctx.callTool(\"middle\", { n: 1 });\n  return { outer: r };\n}\n",
		"svc/tools/middle/tool.json":  `{"name": "middle", "parameters": {"type": "object", "properties": {"n": {"type": "number"}}}, "uses": {"tools": ["inner"]}}`,
		"svc/tools/middle/handler.ts": "export default async function (p: any, ctx: any) {\n  const a = await ctx.callTool(\"inner\", { n: p.n });\n  const b = await ctx.callTool(\"inner\", { n: p.n + 1 });\n  return { middle: [a, b] };\n}\n",
		"svc/tools/inner/tool.json":   `{"name": "inner", "parameters": {"type": "object", "properties": {"n": {"type": "number"}}}}`,
		"svc/tools/inner/handler.ts":  "export default function (p: any) { return { inner: p.n }; }\n",
		"svc/tools/chart/tool.json":   `{"name": "chart", "parameters": {"type": "object", "properties": {"bad": {"type": "string"}}}}`,
		"svc/tools/chart/handler.ts": "export default function (p: any, ctx: any) {\n" +
			"  const cyclic: any = {}; cyclic.self = cyclic;\n" +
			"  switch (p.bad) {\n" +
			"    case \"type\": ctx.widget(\"\", {}); break;\n" +
			"    case \"number\": ctx.widget(7, {}); break;\n" +
			"    case \"missing\": ctx.widget(\"chart\"); break;\n" +
			"    case \"cyclic\": ctx.widget(\"chart\", cyclic); break;\n" +
			"    case \"function\": ctx.widget(\"chart\", () => 1); break;\n" +
			"    case \"big\": ctx.widget(\"chart\", \"x\".repeat(1100000)); break;\n" +
			"  }\n" +
			"  ctx.widget(\"chart\", { points: [1, 2, 3] });\n" +
			"  return \"drawn\";\n" +
			"}\n",
	})
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

// card is what a client learns of one tool call from its start and result frames.
type card struct{ name, parent, status string }

// The children of ctx.callTool stream their own cards, nested under the calling handler's card
// by parent_tool_id, at any depth (spec 4.7 rule 3): on /chat/stream, on /chat/sync, and in the
// AI SDK stream (providerMetadata.svc.parentToolId).
func TestNestedCards(t *testing.T) {
	e := start(t, runtime.Options{Agent: cardsAgent(t), DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	fs := e.chat("", map[string]any{"message": `/tool outer {}`})
	cards := map[string]*card{}
	var order []string
	for _, f := range fs {
		id := str(f.Data["tool_id"])
		switch f.typ() {
		case "tool_call_start":
			if cards[id] != nil {
				t.Fatalf("two starts for %s", id)
			}
			cards[id] = &card{name: str(f.Data["tool_name"]), parent: str(f.Data["parent_tool_id"])}
			order = append(order, id)
		case "tool_call_result":
			c := cards[id]
			if c == nil {
				t.Fatalf("a result before its start: %v", f.Data)
			}
			if str(f.Data["parent_tool_id"]) != c.parent {
				t.Errorf("result of %s names parent %v, its start %q", id, f.Data["parent_tool_id"], c.parent)
			}
			c.status = str(f.Data["status"])
		}
	}
	if len(order) != 4 {
		t.Fatalf("cards %v", order)
	}
	root, mid := order[0], order[1]
	want := map[string]card{
		root:     {"outer", "", "success"},
		mid:      {"middle", root, "success"},
		order[2]: {"inner", mid, "success"},
		order[3]: {"inner", mid, "success"},
	}
	for id, w := range want {
		if *cards[id] != w {
			t.Errorf("card %s = %+v, want %+v", id, *cards[id], w)
		}
	}
	// The children's results come before their parent's.
	var results []string
	for _, f := range ofType(fs, "tool_call_result") {
		results = append(results, str(f.Data["tool_id"]))
	}
	if results[len(results)-1] != root || results[len(results)-2] != mid {
		t.Errorf("result order %v", results)
	}

	// /chat/sync lists the children with their parents.
	r := e.do("POST", "/chat/sync", "", map[string]any{"message": `/tool outer {}`})
	if r.Status != http.StatusOK {
		t.Fatalf("sync: %d %s", r.Status, r.Body)
	}
	var sync struct {
		ToolCalls []struct {
			ToolID       string `json:"tool_id"`
			ToolName     string `json:"tool_name"`
			Status       string `json:"status"`
			ParentToolID string `json:"parent_tool_id"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(r.Body, &sync); err != nil {
		t.Fatal(err)
	}
	if len(sync.ToolCalls) != 4 || sync.ToolCalls[0].ToolName != "outer" || sync.ToolCalls[0].ParentToolID != "" ||
		sync.ToolCalls[1].ParentToolID != sync.ToolCalls[0].ToolID || sync.ToolCalls[2].ParentToolID != sync.ToolCalls[1].ToolID ||
		sync.ToolCalls[3].ParentToolID != sync.ToolCalls[1].ToolID || sync.ToolCalls[3].Status != "success" {
		t.Errorf("sync tool calls %s", r.Body)
	}

	// The AI SDK stream: every card is a tool part; the children's tool-input-available name
	// their parent in providerMetadata, and the step holds them all.
	r = e.do("POST", "/chat/ai-stream", "", map[string]any{"message": `/tool outer {}`})
	checkChunks(t, r.Frames)
	var parts []string
	aiParent, names := map[string]string{}, map[string]string{}
	for _, f := range r.Frames {
		switch f.typ() {
		case "tool-input-available":
			id := str(f.Data["toolCallId"])
			parts = append(parts, str(f.Data["toolName"]))
			names[id] = str(f.Data["toolName"])
			if md, ok := f.Data["providerMetadata"].(map[string]any); ok {
				aiParent[id] = str(md["svc"].(map[string]any)["parentToolId"])
			}
		case "start-step", "finish-step":
			parts = append(parts, f.typ())
		}
	}
	wantParts := []string{"start-step", "outer", "middle", "inner", "inner", "finish-step", "start-step", "finish-step"}
	if len(parts) != len(wantParts) {
		t.Fatalf("AI SDK parts %v, want %v", parts, wantParts)
	}
	for i := range parts {
		if parts[i] != wantParts[i] {
			t.Fatalf("AI SDK parts %v, want %v", parts, wantParts)
		}
	}
	wantParent := map[string]string{"middle": "outer", "inner": "middle"}
	if len(aiParent) != 3 {
		t.Errorf("AI SDK parents %v", aiParent)
	}
	for id, parent := range aiParent {
		if names[parent] != wantParent[names[id]] {
			t.Errorf("AI SDK: %s (%s) has parent %s (%s)", id, names[id], parent, names[parent])
		}
	}
}

// ctx.widget(type, data) in a handler streams a widget frame at once, before the call's result;
// bad arguments throw in the handler, naming what is wrong.
func TestHandlerWidget(t *testing.T) {
	e := start(t, runtime.Options{Agent: cardsAgent(t), DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	fs := e.chat("", map[string]any{"message": `/tool chart {}`})
	var seq []string
	for _, f := range fs {
		if typ := f.typ(); typ == "widget" || typ == "tool_call_start" || typ == "tool_call_result" {
			seq = append(seq, typ)
		}
	}
	if len(seq) != 3 || seq[1] != "widget" {
		t.Fatalf("frames %v", seq)
	}
	w := ofType(fs, "widget")[0].Data
	if w["widget_type"] != "chart" || len(w["data"].(map[string]any)["points"].([]any)) != 3 {
		t.Errorf("widget %v", w)
	}
	for bad, want := range map[string]string{
		"type":     "ctx.widget: type must not be empty",
		"number":   "ctx.widget: type must be a string",
		"missing":  "ctx.widget: data is required",
		"cyclic":   "ctx.widget: data is not JSON-serialisable",
		"function": "ctx.widget: data is not JSON-serialisable",
		"big":      "over the limit of 1048576",
	} {
		fs := e.chat("", map[string]any{"message": `/tool chart {"bad": "` + bad + `"}`})
		res := ofType(fs, "tool_call_result")
		if len(res) != 1 || res[0].Data["status"] != "error" || !strings.Contains(str(res[0].Data["error"]), want) {
			t.Errorf("%s: %v, want an error with %q", bad, res, want)
		}
		if n := len(ofType(fs, "widget")); n != 0 {
			t.Errorf("%s: %d widgets", bad, n)
		}
	}
}
