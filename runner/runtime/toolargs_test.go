package runtime_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/models"
	"svc/runner/runtime"
)

// deskWithEnums is the support-desk fixture with an optional enum on triage and refund_request
// (the fixture's own tools have none), and ask_user and a tool misfile offered to the default
// agent.
func deskWithEnums(t *testing.T) *agent.Agent {
	t.Helper()
	files := agenttest.Files(t, "support-desk")
	patch := func(path, old, new string) {
		t.Helper()
		if !strings.Contains(files[path], old) {
			t.Fatalf("%s has no %q", path, old)
		}
		files[path] = strings.Replace(files[path], old, new, 1)
	}
	patch("svc/tools/triage/tool.json", `"subject": { "type": "string" }`,
		`"subject": { "type": "string" }, "priority": { "enum": ["low", "high"] }`)
	patch("svc/tools/refund_request/tool.json", `"reason": { "type": "string" }`,
		`"reason": { "type": "string" }, "channel": { "type": "string", "enum": ["email", "phone"] }`)
	patch("agents/default/agent.json", `"tools": [`, `"tools": ["ask_user", "misfile", `)
	// misfile calls a store tool with a status the store does not know.
	files["svc/tools/misfile/tool.json"] = `{"name": "misfile", "description": "Files a ticket badly.",
  "parameters": {"type": "object", "properties": {}}, "uses": {"tools": ["store__tickets__set"]}}`
	files["svc/tools/misfile/handler.ts"] = `export default async function (p: any, ctx: any) {
  return await ctx.callTool("store__tickets__set", { customer_id: "m1", number: 1, status: "done" });
}
`
	ag, err := agent.LoadDir(agenttest.Write(t, files))
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

// TestToolArgumentsChecked calls a tool of every kind with the echo model (issue #24 item 3): a
// valid call runs; a call whose arguments miss a required field, have a field of the wrong type
// or a value outside an enum is an error result naming the field, and the tool does not run
// (no ticket written, no durable run started, no request sent, no approval asked, no frame of
// the tool's own).
func TestToolArgumentsChecked(t *testing.T) {
	var hits atomic.Int64 // requests the status API got
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/health" {
			hits.Add(1)
		}
		_, _ = io.WriteString(w, `{"ok": true}`)
	}))
	defer api.Close()
	env := map[string]string{"STATUS_API_URL": api.URL, "STATUS_API_TOKEN": "Bearer sk-test-token"}
	runs := &durable.Memory{}
	e := start(t, runtime.Options{
		Agent: deskWithEnums(t), Durable: durableEngine(t, engine.Config{Store: runs}), DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"},
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})

	// What a tool's run leaves behind.
	type state struct{ tickets, runs, hits int }
	now := func() state {
		t.Helper()
		r := e.do("GET", "/stores/tickets?limit=500", "", nil)
		items, _ := r.JSON["items"].([]any)
		rs, err := runs.List(context.Background(), durable.Filter{})
		if r.Status != http.StatusOK || err != nil {
			t.Fatalf("state: %d %s, %v", r.Status, r.Body, err)
		}
		return state{tickets: len(items), runs: len(rs), hits: int(hits.Load())}
	}
	wrote := func(b, a state, _ []frame) bool { return a.tickets > b.tickets }
	started := func(b, a state, _ []frame) bool { return a.runs > b.runs }
	sent := func(b, a state, _ []frame) bool { return a.hits > b.hits }
	streamed := func(typ string) func(state, state, []frame) bool {
		return func(_, _ state, fs []frame) bool { return len(ofType(fs, typ)) > 0 }
	}
	answered := func(_, _ state, fs []frame) bool { // load_knowledge leaves nothing but its answer
		res := ofType(fs, "tool_call_result")
		return len(res) == 1 && strings.Contains(str(res[0].Data["content"]), "Plans")
	}

	tests := []struct {
		kind, tool, args string
		ran              func(before, after state, fs []frame) bool
		want             string // the error result; "" for a call that runs
	}{
		{"handler", "triage", `{"customer_id":"h1","subject":"refund"}`, wrote, ""},
		{"handler", "triage", `{"customer_id":"c1"}`, wrote, "subject: required"},
		{"handler", "triage", `{"customer_id":"h2","subject":7}`, wrote, "subject: must be a string, got number"},
		{"handler", "triage", `{"customer_id":"h3","subject":"x","priority":"urgent"}`, wrote, `priority: must be one of "low", "high"; got "urgent"`},

		{"durable start", "refund_request", `{"customer_id":"d1","amount_eur":20,"reason":"broken"}`, started, ""},
		{"durable start", "refund_request", `{"customer_id":"d2","amount_eur":20}`, started, "reason: required"},
		{"durable start", "refund_request", `{"customer_id":"d3","amount_eur":"20","reason":"broken"}`, started, "amount_eur: must be a number, got string"},
		{"durable start", "refund_request", `{"customer_id":"d4","amount_eur":20,"reason":"x","channel":"fax"}`, started, `channel: must be one of "email", "phone"; got "fax"`},

		{"store", "store__tickets__set", `{"customer_id":"s1","number":1,"status":"open"}`, wrote, ""},
		{"store", "store__tickets__set", `{"number":2,"status":"open"}`, wrote, "customer_id: required (Part of the key {customer_id}-{number})"},
		{"store", "store__tickets__set", `{"customer_id":"s3","number":"3"}`, wrote, "number: must be an integer, got string"},
		{"store", "store__tickets__set", `{"customer_id":"s4","number":4,"status":"done"}`, wrote, `status: must be one of "open", "pending", "closed"; got "done"`},
		{"store", "store__tickets__set", `{"customer_id":"s5","number":5,"owner":"jo"}`, wrote, "owner: unknown field (known: amount_eur, customer_id, number, status, subject)"},
		{"store", "store__tickets__query", `{"where":{"status":"done"},"limit":0}`, nil,
			`limit: must be at least 1, got 0; where.status: must be one of "open", "pending", "closed"; got "done"`},
		{"store", "store__tickets__get", `{}`, nil, "key: required (The record's key: {customer_id}-{number} filled in with its fields)"},

		{"built-in", "load_knowledge", `{"name":"plans"}`, answered, ""},
		{"built-in", "load_knowledge", `{}`, answered, "name: required (Name of the knowledge document)"},
		{"built-in", "load_knowledge", `{"name":["plans"]}`, answered, "name: must be a string, got array"},
		{"built-in", "load_knowledge", `{"name":"pricing"}`, answered, `name: must be one of "plans", "refund-policy"; got "pricing"`},
		{"built-in", "load_skill", `{"name":"refunds"}`, streamed("skill_activated"), ""},
		{"built-in", "load_skill", `{"name":"billing"}`, streamed("skill_activated"), `name: must be "refunds"; got "billing"`},
		{"built-in", "ask_user", `{"question":"Which plan?","options":[{"value":"pro","label":"Pro"}]}`, streamed("ask_choice"), ""},
		{"built-in", "ask_user", `{"options":[{"value":"pro","label":"Pro"}]}`, streamed("ask_choice"), "question: required (The question, in the user's language)"},
		{"built-in", "ask_user", `{"question":"Q","options":[{"value":"pro"}],"multi":"yes"}`, streamed("ask_choice"),
			"multi: must be a boolean, got string; options[0].label: required (What the button shows)"},
		{"built-in", "handoff", `{"agent":"billing"}`, streamed("agent_handoff"), ""},
		{"built-in", "handoff", `{}`, streamed("agent_handoff"), "agent: required (The agent to hand over to)"},
		{"built-in", "handoff", `{"agent":"sales"}`, streamed("agent_handoff"), `agent: must be "billing"; got "sales"`},

		{"connection", "request", `{"connection":"status","method":"GET","path":"/incidents"}`, sent, ""},
		{"connection", "request", `{"connection":"status","method":"GET"}`, sent, "path: required (The path relative to the connection's base URL, starting with /, such as /items/42. No scheme or host)"},
		{"connection", "request", `{"connection":"status","method":"GET","path":42}`, sent, "path: must be a string, got number"},
		{"connection", "request", `{"connection":"status","method":"FETCH","path":"/incidents"}`, sent,
			`method: must be one of "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"; got "FETCH"`},
		// A write its rule would ask the user about: refused before anyone is asked.
		{"connection", "request", `{"connection":"status","method":"POST","path":"/incidents/inc_1/subscribe","intent":"yes"}`, streamed("confirmation_required"),
			`intent: must be one of "read", "write", "confirmed_write"; got "yes"`},
	}
	for _, tt := range tests {
		name := tt.kind + "/" + tt.tool + "/" + tt.want
		if tt.want == "" {
			name = tt.kind + "/" + tt.tool + "/valid"
		}
		t.Run(name, func(t *testing.T) {
			before := now()
			fs := e.chat("", map[string]any{"message": "/tool " + tt.tool + " " + tt.args})
			after := now()
			res := ofType(topLevel(fs), "tool_call_result")
			if len(res) != 1 {
				t.Fatalf("frames %v: want one tool_call_result", types(fs))
			}
			got := res[0].Data
			ran := tt.ran != nil && tt.ran(before, after, fs)
			if tt.want == "" {
				if got["status"] != "success" || (tt.ran != nil && !ran) {
					t.Errorf("valid call: result %v, ran %v; want success and the tool's effect", got, ran)
				}
				return
			}
			want := "invalid arguments for " + tt.tool + ": " + tt.want
			if got["status"] != "error" || got["error"] != want || got["content"] != "error: "+want {
				t.Errorf("result %v\nwant status error, error %q", got, want)
			}
			if ran {
				t.Errorf("the tool ran (before %+v, after %+v, frames %v)", before, after, types(fs))
			}
			if after != before {
				t.Errorf("state changed from %+v to %+v", before, after)
			}
		})
	}
}

// TestChildCallArgumentsChecked: a handler's ctx.callTool is checked against the child's schema
// as the model's calls are: the child does not run and the handler throws, naming the field.
func TestChildCallArgumentsChecked(t *testing.T) {
	e := start(t, runtime.Options{Agent: deskWithEnums(t), DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	fs := e.chat("", map[string]any{"message": `/tool misfile {}`})
	res := ofType(fs, "tool_call_result")
	want := `failed: invalid arguments for store__tickets__set: status: must be one of "open", "pending", "closed"; got "done"`
	if len(res) != 1 || res[0].Data["status"] != "error" || !strings.Contains(str(res[0].Data["error"]), want) {
		t.Fatalf("misfile: %v; want an error containing %q", res, want)
	}
	if r := e.do("GET", "/stores/tickets/m1-1", "", nil); r.Status != http.StatusNotFound {
		t.Errorf("the child ran: %d %s", r.Status, r.Body)
	}
}
