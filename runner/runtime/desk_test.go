package runtime_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/agent"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
)

// TestSupportDeskActs runs the support-desk fixture's store and connection tools end to end
// with the echo model: a read of the status API, a write that asks the user first and runs once
// approved, and a ticket in the store; the API's token reaches the API and nothing else.
func TestSupportDeskActs(t *testing.T) {
	const token = "Bearer sk-status-SECRET-7f3a"
	var mu sync.Mutex
	var seen []string // method path auth of each call the status API got
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/health" { // the runtime's check of testPath, for its /health
			io.WriteString(w, `{"ok": true}`)
			return
		}
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		switch {
		case r.Method == "GET" && r.URL.Path == "/incidents":
			io.WriteString(w, `[{"id": "inc_1", "title": "VPN down", "severity": "major"}]`)
		case r.Method == "POST" && r.URL.Path == "/incidents/inc_1/subscribe":
			io.WriteString(w, `{"subscribed": true, "echo_auth": "`+r.Header.Get("Authorization")+`"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer api.Close()
	env := map[string]string{"STATUS_API_URL": api.URL, "STATUS_API_TOKEN": token}
	var logs bytes.Buffer
	e := start(t, runtime.Options{
		Agent: loadAgent(t, "support-desk"), DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"},
		Env:    func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	var all strings.Builder
	keep := func(fs []frame) []frame {
		for _, f := range fs {
			all.WriteString(f.Raw + "\n")
		}
		return fs
	}

	// A read runs at once; its body comes back parsed.
	fs := keep(e.chat("", map[string]any{"message": `/tool request {"connection": "status", "method": "GET", "path": "/incidents"}`, "session_id": "ses_desk"}))
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 || res[0].Data["status"] != "success" || !strings.Contains(str(res[0].Data["content"]), "VPN down") {
		t.Fatalf("read: %v", res)
	}
	// A write asks first (policy confirm always), then runs once approved.
	s := e.open(t, map[string]any{"message": `/tool request {"connection": "status", "method": "POST", "path": "/incidents/inc_1/subscribe", "intent": "write", "body": {"email": "jo@example.com"}}`, "session_id": "ses_desk"})
	c := s.until("confirmation_required").Data
	if c["connection_name"] != "status" || c["method"] != "POST" || c["endpoint"] != "/incidents/inc_1/subscribe" || c["reason"] != "Subscribe the customer to updates" {
		t.Errorf("confirmation_required %v", c)
	}
	if r := e.answer("ses_desk", str(c["correlation_id"]), true); r.Status != http.StatusOK {
		t.Fatalf("answer: %d %s", r.Status, r.Body)
	}
	if res := s.until("tool_call_result").Data; res["status"] != "success" || !strings.Contains(str(res["content"]), "subscribed") {
		t.Errorf("write: %v", res)
	}
	s.until("done")
	for _, f := range s.all {
		all.WriteString(f.Raw + "\n")
	}
	// A write that no specific rule allows is refused without asking.
	fs = keep(e.chat("", map[string]any{"message": `/tool request {"connection": "status", "method": "DELETE", "path": "/incidents/inc_1", "intent": "write"}`, "session_id": "ses_desk"}))
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "error" || len(ofType(fs, "confirmation_required")) != 0 {
		t.Errorf("refused write: %v", types(fs))
	}
	// A ticket goes to the store.
	fs = keep(e.chat("", map[string]any{"message": `/tool store__tickets__set {"customer_id": "acme", "number": 1, "subject": "VPN down", "status": "open"}`, "session_id": "ses_desk"}))
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "success" {
		t.Errorf("ticket: %v", res)
	}

	mu.Lock()
	got := strings.Join(seen, "\n")
	mu.Unlock()
	if got != "GET /incidents "+token+"\nPOST /incidents/inc_1/subscribe "+token {
		t.Errorf("the status API got:\n%s", got)
	}
	// The token was sent, and appears nowhere else: not in frames, history, inspect or logs.
	hist := e.do("GET", "/sessions/history/ses_desk", "", nil)
	inspect := e.do("GET", "/inspect/connections/status", "", nil)
	for what, text := range map[string]string{"frames": all.String(), "history": string(hist.Body), "inspect": string(inspect.Body), "logs": logs.String()} {
		if strings.Contains(text, "SECRET-7f3a") {
			t.Errorf("the connection's token appears in the %s", what)
		}
	}
	// /health reports the connection's check of its testPath (it runs at start, on its own).
	deadline := time.Now().Add(10 * time.Second)
	for {
		hr := e.do("GET", "/health", "", nil)
		st, _ := hr.JSON["connections"].(map[string]any)["status"].(map[string]any)
		if st["status"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health: %s", hr.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var h struct{ Messages []json.RawMessage }
	if err := json.Unmarshal(hist.Body, &h); err != nil || len(h.Messages) < 8 {
		t.Errorf("history: %v, %d messages", err, len(h.Messages))
	}
}

// TestSupportDeskActsWithAModelAPI is the same tools asked for by an OpenAI-compatible model API
// (a fake on 127.0.0.1): two calls in one answer, run in parallel, then the model's reply.
func TestSupportDeskActsWithAModelAPI(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `[{"id": "inc_1", "title": "VPN down"}]`)
	}))
	defer api.Close()
	model := modelstest.NewOpenAIServer(t,
		modelstest.Turn{ToolCalls: []modelstest.ToolCall{
			{ID: "c1", Name: "request", Arguments: `{"connection": "status", "method": "GET", "path": "/incidents"}`},
			{ID: "c2", Name: "store__tickets__set", Arguments: `{"customer_id": "acme", "number": 2, "subject": "VPN", "status": "open"}`},
		}},
		modelstest.Turn{Text: []string{"Filed ticket acme-2 about the VPN incident."}})
	env := map[string]string{"STATUS_API_URL": api.URL, "STATUS_API_TOKEN": "Bearer status-token-1"}
	ag := loadAgent(t, "support-desk")
	ag.Config.Models["main"] = agent.ModelRef{Provider: "openai", Model: "gpt-4.1-mini"} // the fixture's is echo
	e := start(t, runtime.Options{
		Agent: ag, Models: openaiModels(model),
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	fs := e.chat("", map[string]any{"message": "Is the VPN down? File a ticket for acme.", "metadata": map[string]string{"userId": "meta-user-42", "screen": "meta-screen-7"}})
	res := ofType(fs, "tool_call_result")
	if len(res) != 2 || res[0].Data["status"] != "success" || res[1].Data["status"] != "success" {
		t.Fatalf("results %v; frames %v", res, fs)
	}
	if text(fs) != "Filed ticket acme-2 about the VPN incident." || done(t, fs)["reason"] != "model_stop" {
		t.Errorf("answer %q, done %v", text(fs), done(t, fs))
	}
	if r := e.do("GET", "/stores/tickets/acme-2", "", nil); r.Status != http.StatusOK {
		t.Errorf("the ticket: %d %s", r.Status, r.Body)
	}
	// The second model call saw both results.
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "VPN down") || !strings.Contains(string(reqs[1].Body), "acme-2") {
		t.Errorf("the model's second request lacks the tool results")
	}
	// Metadata never reaches the model (spec 2.6).
	for _, r := range reqs {
		if strings.Contains(string(r.Body), "meta-user-42") || strings.Contains(string(r.Body), "meta-screen-7") {
			t.Errorf("a model request holds the chat's metadata: %s", r.Body)
		}
	}
}

// TestTriageComposite runs the support-desk fixture's composite tool: it reads and writes the
// tickets store through ctx.callTool and asks the billing specialist through ctx.callSubagent,
// whose activity streams as subagent_event frames of the triage call.
func TestTriageComposite(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk")})
	fs := e.chat("", map[string]any{"message": `/tool triage {"customer_id": "acme", "subject": "refund my invoice"}`})
	res := ofType(topLevel(fs), "tool_call_result")
	if len(res) != 1 || res[0].Data["status"] != "success" {
		t.Fatalf("triage: %v", res)
	}
	if r := res[0].Data["result"].(map[string]any); r["ticket"] != "acme-1" || r["billing"] != false { // the echo model answers "echo: ...", not "yes"
		t.Errorf("triage result %v", r)
	}
	subs := ofType(fs, "subagent_event")
	if len(subs) == 0 || subs[0].Data["agent_name"] != "billing" || subs[0].Data["parent_tool_id"] != ofType(fs, "tool_call_start")[0].Data["tool_id"] {
		t.Fatalf("subagent_event frames %v", subs)
	}
	var said strings.Builder
	for _, s := range subs {
		if s.Data["event_type"] == "text" {
			said.WriteString(str(s.Data["text"]))
		}
	}
	if !strings.HasPrefix(said.String(), "echo: Is this about money?") {
		t.Errorf("the specialist said %q", said.String())
	}
	if r := e.do("GET", "/stores/tickets/acme-1", "", nil); r.Status != http.StatusOK || r.JSON["value"].(map[string]any)["subject"] != "refund my invoice" {
		t.Errorf("the ticket: %d %s", r.Status, r.Body)
	}
	// A second triage numbers the next ticket from the store.
	fs = e.chat("", map[string]any{"message": `/tool triage {"customer_id": "acme", "subject": "VPN"}`})
	if r := ofType(topLevel(fs), "tool_call_result"); len(r) != 1 || r[0].Data["result"].(map[string]any)["ticket"] != "acme-2" {
		t.Errorf("second triage: %v", r)
	}
}

// An eval's turn makes no connection write unless the eval allows it ("Allow writes:"), and then
// without asking; a durable tool it starts is cancelled at its first pause (issue 15, item 5).
func TestEvalTurnsAreSafe(t *testing.T) {
	var mu sync.Mutex
	var writes int
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			mu.Lock()
			writes++
			mu.Unlock()
		}
		io.WriteString(w, `{"ok": true}`)
	}))
	defer api.Close()
	env := map[string]string{"STATUS_API_URL": api.URL, "STATUS_API_TOKEN": "Bearer status-token-1"}
	runs := &durable.Memory{}
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Durable: durableEngine(t, engine.Config{Store: runs}),
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	write := `/tool request {"connection": "status", "method": "POST", "path": "/incidents/inc_1/subscribe", "body": {"email": "a@b.c"}, "intent": "write"}`
	result := func(et runtime.EvalTurn) map[string]any {
		t.Helper()
		_, frames, err := e.rt.RunTurn(t.Context(), et)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			if f.Type == "confirmation_required" {
				t.Errorf("an eval turn asked for approval")
			}
			if f.Type == "tool_call_result" {
				return map[string]any{"status": f.Status, "error": f.Error, "content": f.Content}
			}
		}
		t.Fatal("no tool result")
		return nil
	}
	if r := result(runtime.EvalTurn{Message: write}); r["status"] != "error" || !strings.Contains(str(r["error"]), `add the line "Allow writes: status" under ## Setup of the eval`) || writes != 0 {
		t.Errorf("a write without permission: %v, %d writes", r, writes)
	}
	if r := result(runtime.EvalTurn{Message: write, AllowWrites: []string{"status"}}); r["status"] != "success" || writes != 1 {
		t.Errorf("a write with permission: %v, %d writes", r, writes)
	}
	if r := result(runtime.EvalTurn{Message: write, AllowWrites: []string{"*"}}); r["status"] != "success" || writes != 2 {
		t.Errorf("a write with permission for every connection: %v, %d writes", r, writes)
	}
	r := result(runtime.EvalTurn{Message: `/tool refund_request {"customer_id": "c9", "amount_eur": 900, "reason": "x"}`})
	if r["status"] != "success" || !strings.Contains(str(r["content"]), `"status":"cancelled"`) {
		t.Errorf("a durable tool in an eval: %v", r)
	}
	list, _ := runs.List(t.Context(), durable.Filter{})
	if len(list) != 1 || list[0].Status != durable.Cancelled {
		t.Errorf("runs %+v", list)
	}
}
