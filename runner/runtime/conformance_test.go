package runtime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
	"svc/runner/sse"
	"svc/runner/tools"
)

// funcTool is a host tool whose behaviour is a function.
type funcTool struct {
	name string
	fn   func(ctx context.Context, c tools.Call) (tools.Result, error)
}

func (f funcTool) Spec() models.ToolSpec {
	return models.ToolSpec{Name: f.name, Description: "test tool", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (f funcTool) Call(ctx context.Context, c tools.Call) (tools.Result, error) { return f.fn(ctx, c) }

// Every frame has a type and an ISO 8601 timestamp, and init opens every stream.
func checkFrames(t *testing.T, fs []frame) {
	t.Helper()
	if len(fs) == 0 || fs[0].typ() != "init" {
		t.Fatalf("stream does not open with init: %v", types(fs))
	}
	for _, f := range fs {
		ts := str(f.Data["timestamp"])
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasSuffix(ts, "Z") {
			t.Errorf("frame %s: timestamp %q is not ISO 8601 UTC", f.typ(), ts)
		}
	}
}

func TestStreamEchoTurn(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	for _, path := range []string{"/chat", "/chat/stream"} {
		r := e.do("POST", path, "", map[string]any{"message": "hello there"})
		if r.Status != 200 || r.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
			t.Fatalf("%s: status %d, content type %q", path, r.Status, r.Header.Get("Content-Type"))
		}
		fs := r.Frames
		checkFrames(t, fs)
		if got, want := types(fs)[:2], []string{"init", "warning"}; !cmp.Equal(got, want) {
			t.Errorf("%s: frames %v, want init then the echo warning", path, types(fs))
		}
		if w := str(fs[1].Data["message"]); !strings.Contains(w, "echo model") {
			t.Errorf("warning = %q", w)
		}
		if got := text(fs); got != "echo: hello there" {
			t.Errorf("text = %q", got)
		}
		d := done(t, fs)
		if d["reason"] != "model_stop" || num(d["turns"]) != 1 {
			t.Errorf("done = %v", d)
		}
		u := d["usage"].(map[string]any)
		if num(u["output_tokens"]) != 3 || num(u["total_tokens"]) != num(u["input_tokens"])+3 || u["cached_tokens"] == nil {
			t.Errorf("usage = %v", u)
		}
	}
}

func TestResumeKeepsHistoryAndWarnsOnce(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	fs := e.chat("", map[string]any{"message": "hi"})
	id := sessionOf(t, fs)
	warnings := ofType(fs, "warning")
	if len(warnings) != 1 {
		t.Fatalf("first turn warnings = %v, want exactly one", warnings)
	}
	if msg := str(warnings[0].Data["message"]); !strings.Contains(msg, "echo model") {
		t.Errorf("warning %q does not name the echo model", msg)
	}
	fs = e.chat("", map[string]any{"message": "again", "session_id": id})
	if sessionOf(t, fs) != id {
		t.Fatalf("resume got session %s, want %s", sessionOf(t, fs), id)
	}
	if len(ofType(fs, "warning")) != 0 {
		t.Errorf("second turn repeated the warning")
	}
	h := e.do("GET", "/sessions/history/"+id, "", nil)
	msgs := h.JSON["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("history has %d messages, want 4: %s", len(msgs), h.Body)
	}
	if got := str(msgs[3].(map[string]any)["content"]); got != "echo: again" {
		t.Errorf("last message = %q", got)
	}
}

func TestToolFrames(t *testing.T) {
	release := make(chan struct{})
	host := funcTool{"progress", func(ctx context.Context, c tools.Call) (tools.Result, error) {
		_ = c.Host.Emit(&sse.Frame{Type: sse.TypeToolLog, ToolName: "progress", Message: "step 1"})
		_ = c.Host.Emit(&sse.Frame{Type: sse.TypeToolLabelUpdate, ToolID: c.ID, RunningLabel: "Halfway", CompletedLabel: "Finished"})
		return tools.Result{Content: "progress done", Data: json.RawMessage(`{"ok":true}`)}, nil
	}}
	close(release)
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), ExtraTools: []tools.Tool{host}})

	fs := e.chat("", map[string]any{"message": `/tool load_knowledge {"name":"plans"}`})
	checkFrames(t, fs)
	start := ofType(fs, "tool_call_start")
	result := ofType(fs, "tool_call_result")
	if len(start) != 1 || len(result) != 1 {
		t.Fatalf("frames %v", types(fs))
	}
	if s := start[0].Data; s["tool_name"] != "load_knowledge" || s["running_label"] != "Reading plans" || s["completed_label"] != "Read plans" ||
		!cmp.Equal(s["parameters"], map[string]any{"name": "plans"}) || str(s["tool_id"]) == "" {
		t.Errorf("tool_call_start = %v", s)
	}
	if r := result[0].Data; r["tool_id"] != start[0].Data["tool_id"] || r["status"] != "success" || !strings.Contains(str(r["content"]), "| starter |") || r["duration_ms"] == nil {
		t.Errorf("tool_call_result = %v", r)
	}
	if d := done(t, fs); d["reason"] != "model_stop" || num(d["turns"]) != 2 {
		t.Errorf("done = %v", d)
	}
	id := sessionOf(t, fs)

	fs = e.chat("", map[string]any{"message": `/tool load_skill {"name":"refunds"}`, "session_id": id})
	if sk := ofType(fs, "skill_activated"); len(sk) != 1 || sk[0].Data["skill_name"] != "refunds" {
		t.Errorf("skill_activated = %v (%v)", sk, types(fs))
	}
	fs = e.chat("", map[string]any{"message": `/tool progress {}`, "session_id": id})
	if l := ofType(fs, "tool_log"); len(l) != 1 || l[0].Data["message"] != "step 1" || l[0].Data["tool_name"] != "progress" {
		t.Errorf("tool_log = %v", l)
	}
	if l := ofType(fs, "tool_label_update"); len(l) != 1 || l[0].Data["running_label"] != "Halfway" || l[0].Data["completed_label"] != "Finished" {
		t.Errorf("tool_label_update = %v", l)
	}
	if r := ofType(fs, "tool_call_result"); len(r) != 1 || !cmp.Equal(r[0].Data["result"], map[string]any{"ok": true}) {
		t.Errorf("structured result = %v", r)
	}
	// A durable tool that does not pause completes within the call.
	fs = e.chat("", map[string]any{"message": `/tool refund_request {"customer_id":"c1","amount_eur":10,"reason":"late"}`, "session_id": id})
	if r := ofType(topLevel(fs), "tool_call_result"); len(r) != 1 || r[0].Data["status"] != "success" || r[0].Data["result"].(map[string]any)["status"] != "refunded" {
		t.Errorf("durable tool result = %v", r)
	}
	// Its child calls nest under the chat's card of the durable call, not under the run's id.
	starts := ofType(fs, "tool_call_start")
	if len(starts) < 2 || starts[1].Data["parent_tool_id"] != starts[0].Data["tool_id"] || str(starts[1].Data["tool_id"]) != str(starts[0].Data["tool_id"])+".1" {
		t.Errorf("durable nested cards = %v", starts)
	}
	ctx := e.do("GET", "/inspect/context?session_id="+id, "", nil)
	if !cmp.Equal(ctx.JSON["active_skills"], []any{"refunds"}) || !cmp.Equal(ctx.JSON["loaded_knowledge"], []any{"plans"}) {
		t.Errorf("inspect/context = %s", ctx.Body)
	}
}

func TestSkillScopedSession(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"ok"}})
	ag := loadAgent(t, "support-desk")
	ag.Config.Models = map[string]agent.ModelRef{"main": {Provider: "openai", Model: "gpt-4o"}}
	ag.Config.BasePrompt += " User: {{context.userId}}."
	e := start(t, runtime.Options{Agent: ag, Models: openaiModels(srv)})
	fs := e.chat("", map[string]any{"message": "money back please", "skill": "refunds", "context": map[string]string{"plan": "team"},
		"metadata": map[string]string{"userId": "META-VALUE-XYZ", "screen": "META-SCREEN"}})
	// Metadata never reaches the model, its tools or the prompt templates.
	if body := string(srv.Requests()[0].Body); strings.Contains(body, "META-") || !strings.Contains(body, "User: .") {
		t.Errorf("model request carries metadata or filled an unknown key: %s", body)
	}
	if sk := ofType(fs, "skill_activated"); len(sk) != 1 || sk[0].Data["skill_name"] != "refunds" {
		t.Fatalf("frames %v", types(fs))
	}
	system := str(srv.Requests()[0].JSON["messages"].([]any)[0].(map[string]any)["content"])
	for _, want := range []string{"## Active skill: refunds", "The customer's plan is team.", "# Support desk"} {
		if !strings.Contains(system, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, system)
		}
	}
	id := sessionOf(t, fs)
	ctx := e.do("GET", "/inspect/context?session_id="+id, "", nil)
	if !cmp.Equal(ctx.JSON["active_skills"], []any{"refunds"}) || !strings.Contains(str(ctx.JSON["system_prompt"]), "plan is team") {
		t.Errorf("inspect/context = %s", ctx.Body)
	}
}

func TestThinkingAndModelChoice(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Reasoning: []string{"let me ", "think"}, Text: []string{"answer"}})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv)})
	fs := e.chat("", map[string]any{"message": "q", "model": map[string]any{"provider": "openai", "model": "gpt-4o-mini", "effort": "low"}})
	var thinking string
	for _, f := range ofType(fs, "thinking_delta") {
		thinking += str(f.Data["content"])
	}
	if thinking != "let me think" || text(fs) != "answer" {
		t.Errorf("thinking %q text %q (%v)", thinking, text(fs), types(fs))
	}
	if len(ofType(fs, "warning")) != 0 {
		t.Errorf("a chosen model must not warn: %v", ofType(fs, "warning"))
	}
	if m := srv.Requests()[0].JSON["model"]; m != "gpt-4o-mini" {
		t.Errorf("model sent = %v", m)
	}
	// The session keeps its model.
	e.chat("", map[string]any{"message": "again", "session_id": sessionOf(t, fs)})
	if m := srv.Requests()[1].JSON["model"]; m != "gpt-4o-mini" {
		t.Errorf("resumed model = %v", m)
	}
}

func TestDefaultModelOption(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"from default"}})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4.1"}})
	fs := e.chat("", map[string]any{"message": "q"})
	if text(fs) != "from default" || len(ofType(fs, "warning")) != 0 {
		t.Errorf("frames %v text %q", types(fs), text(fs))
	}
	if m := srv.Requests()[0].JSON["model"]; m != "gpt-4.1" {
		t.Errorf("model = %v", m)
	}
}

func alwaysTool() modelstest.Turn {
	return modelstest.Turn{ToolCalls: []modelstest.ToolCall{{ID: "c", Name: "load_knowledge", Arguments: `{"name":"plans"}`}}, Usage: modelstest.Usage{InputTokens: 10, OutputTokens: 10}}
}

func TestDoneReasons(t *testing.T) {
	t.Run("max_turns", func(t *testing.T) {
		srv := modelstest.NewOpenAIServer(t, alwaysTool(), alwaysTool(), modelstest.Turn{Text: []string{"Did two lookups; say continue."}})
		e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Models: openaiModels(srv), MaxTurns: 2})
		fs := e.chat("", map[string]any{"message": "go", "model": map[string]any{"provider": "openai", "model": "gpt-4o"}})
		d := done(t, fs)
		if d["reason"] != "max_turns" || num(d["turns"]) != 2 || text(fs) != "Did two lookups; say continue." || srv.Calls() != 3 {
			t.Errorf("done %v text %q calls %d", d, text(fs), srv.Calls())
		}
	})
	t.Run("budget_exceeded", func(t *testing.T) {
		e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
		fs := e.chat("", map[string]any{"message": "first", "max_session_tokens": 1})
		if d := done(t, fs); d["reason"] != "model_stop" {
			t.Fatalf("first turn under budget: done %v", d)
		}
		fs = e.chat("", map[string]any{"message": "second", "session_id": sessionOf(t, fs)})
		d := done(t, fs)
		if d["reason"] != "budget_exceeded" || num(d["turns"]) != 0 || !strings.Contains(text(fs), "token budget of 1 tokens") {
			t.Errorf("done %v text %q", d, text(fs))
		}
	})
	t.Run("error", func(t *testing.T) {
		srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Status: http.StatusBadRequest, ErrorMessage: "model exploded"})
		e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv)})
		fs := e.chat("", map[string]any{"message": "go", "model": map[string]any{"provider": "openai", "model": "gpt-4o"}})
		errs := ofType(fs, "error")
		if d := done(t, fs); d["reason"] != "error" || len(errs) != 1 || !strings.Contains(str(errs[0].Data["message"]), "model exploded") {
			t.Errorf("done %v errors %v", d, errs)
		}
	})
	t.Run("model unavailable", func(t *testing.T) {
		ag := loadAgent(t, "hello")
		ag.Config.Models = map[string]agent.ModelRef{"main": {Provider: "openai", Model: "gpt-4o", APIKey: "env:NOT_SET_ANYWHERE"}}
		e := start(t, runtime.Options{Agent: ag})
		fs := e.chat("", map[string]any{"message": "go"})
		if d := done(t, fs); d["reason"] != "error" || len(ofType(fs, "error")) != 1 || !strings.Contains(str(ofType(fs, "error")[0].Data["message"]), "NOT_SET_ANYWHERE") {
			t.Errorf("frames %v", fs)
		}
	})
	// model_stop: TestStreamEchoTurn; user_abort: TestDisconnectIsUserAbort.
}

func TestDisconnectIsUserAbort(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"partial ", "answer"}, Hang: true}, modelstest.Turn{Text: []string{"second"}})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	resp, err := e.srv.Client().Do(e.request("POST", "/chat/stream", "", map[string]any{"message": "start"}))
	if err != nil {
		t.Fatal(err)
	}
	fs := readFrames(t, resp.Body, 3) // init, text_delta, text_delta: the model now hangs
	if got := types(fs); !cmp.Equal(got, []string{"init", "text_delta", "text_delta"}) {
		t.Fatalf("frames %v", got)
	}
	id := sessionOf(t, fs)
	// A second chat on the running session is refused.
	if r := e.do("POST", "/chat/stream", "", map[string]any{"message": "x", "session_id": id}); r.Status != http.StatusConflict || r.JSON["error"] != "turn_in_progress" {
		t.Errorf("concurrent turn: %d %s", r.Status, r.Body)
	}
	resp.Body.Close() // the client leaves
	h := e.waitIdle(id)
	msgs := h["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if len(msgs) != 2 || last["role"] != "assistant" || last["content"] != "partial answer" || last["interrupted"] != true {
		t.Fatalf("history after disconnect: %v", h)
	}
	// The session continues later, with the interrupted exchange in its history.
	fs = e.chat("", map[string]any{"message": "next", "session_id": id})
	if text(fs) != "second" || done(t, fs)["reason"] != "model_stop" {
		t.Errorf("resume after abort: %v", types(fs))
	}
	sent := srv.Requests()[1].JSON["messages"].([]any)
	if c := sent[len(sent)-2].(map[string]any)["content"]; c != "partial answer" {
		t.Errorf("the model did not see the interrupted answer: %v", sent)
	}
}

func TestSyncAnswer(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk")})
	r := e.do("POST", "/chat/sync", "", map[string]any{"message": `/tool load_knowledge {"name":"plans"}`})
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	a := r.JSON
	if str(a["session_id"]) == "" || !strings.HasPrefix(str(a["text"]), "echo: ---") && !strings.HasPrefix(str(a["text"]), "echo: # Plans") {
		t.Errorf("answer = %s", r.Body)
	}
	calls := a["tool_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("tool_calls = %v", calls)
	}
	c := calls[0].(map[string]any)
	if c["tool_name"] != "load_knowledge" || c["status"] != "success" || !cmp.Equal(c["parameters"], map[string]any{"name": "plans"}) {
		t.Errorf("tool call = %v", c)
	}
	d := a["done"].(map[string]any)
	if d["reason"] != "model_stop" || num(d["turns"]) != 2 || d["usage"].(map[string]any)["total_tokens"] == nil {
		t.Errorf("done = %v", d)
	}
	if w, ok := a["warnings"]; ok && len(w.([]any)) != 0 {
		t.Errorf("warnings = %v: every tool of support-desk runs", w)
	}
}

func TestQueuedMessage(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	wait := funcTool{"wait", func(ctx context.Context, c tools.Call) (tools.Result, error) {
		close(entered)
		select {
		case <-release:
			return tools.Result{Content: "waited"}, nil
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		}
	}}
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), ExtraTools: []tools.Tool{wait}})
	// An idle session accepts no queued message.
	fs := e.chat("", map[string]any{"message": "hi"})
	id := sessionOf(t, fs)
	if r := e.do("POST", "/chat/sessions/"+id+"/messages", "", map[string]any{"message": "x"}); r.Status != http.StatusConflict || r.JSON["error"] != "no_active_turn" {
		t.Errorf("queue on idle session: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/chat/sessions/nope/messages", "", map[string]any{"message": "x"}); r.Status != http.StatusNotFound {
		t.Errorf("queue on unknown session: %d", r.Status)
	}
	if r := e.do("POST", "/chat/sessions/"+id+"/messages", "", map[string]any{}); r.Status != http.StatusBadRequest || r.JSON["field"] != "message" {
		t.Errorf("queue without message: %d %s", r.Status, r.Body)
	}
	result := make(chan []frame, 1)
	go func() { result <- e.chat("", map[string]any{"message": "/tool wait", "session_id": id}) }()
	<-entered
	r := e.do("POST", "/chat/sessions/"+id+"/messages", "", map[string]any{"message": "also this"})
	if r.Status != http.StatusAccepted || r.JSON["status"] != "queued" || !strings.HasPrefix(str(r.JSON["message_id"]), "msg_") {
		t.Errorf("queue: %d %s", r.Status, r.Body)
	}
	close(release)
	fs = <-result
	// The loop read the queued message between steps: echo answers the latest user message.
	if got := text(fs); got != "echo: also this" {
		t.Errorf("text after queued message = %q", got)
	}
	h := e.do("GET", "/sessions/history/"+id, "", nil)
	var roles []string
	for _, m := range h.JSON["messages"].([]any) {
		roles = append(roles, str(m.(map[string]any)["role"]))
	}
	if want := []string{"user", "assistant", "user", "assistant", "tool", "user", "assistant"}; !cmp.Equal(want, roles) {
		t.Errorf("history roles = %v, want %v", roles, want)
	}
}

func TestCompactionFrames(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"ok"}})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv), ContextWindow: 2000,
		DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	id := ""
	long := strings.Repeat("word ", 200)
	var fs []frame
	for i := 0; i < 8; i++ {
		body := map[string]any{"message": long}
		if id != "" {
			body["session_id"] = id
		}
		fs = e.chat("", body)
		id = sessionOf(t, fs)
		if len(ofType(fs, "compaction_start")) > 0 {
			break
		}
	}
	starts, ends := ofType(fs, "compaction_start"), ofType(fs, "compaction_end")
	if len(starts) != 1 || len(ends) != 1 {
		t.Fatalf("no compaction after 8 long turns: %v", types(fs))
	}
	if num(starts[0].Data["threshold"]) != 1800 || num(starts[0].Data["estimated_tokens"]) <= 1800 {
		t.Errorf("compaction_start = %v", starts[0].Data)
	}
	if e := ends[0].Data; num(e["tokens_after"]) >= num(e["tokens_before"]) || e["compaction_tokens"] == nil {
		t.Errorf("compaction_end = %v", e)
	}
	ctx := e.do("GET", "/inspect/context?session_id="+id, "", nil)
	if ctx.JSON["compacted"] != true || num(ctx.JSON["messages_in_context"]) >= num(ctx.JSON["messages"]) {
		t.Errorf("inspect after compaction: %s", ctx.Body)
	}
	// The next turn starts from the stored summary.
	before := srv.Calls()
	e.chat("", map[string]any{"message": "short", "session_id": id})
	reqs := srv.Requests()
	sent := reqs[len(reqs)-1].JSON["messages"].([]any)
	if srv.Calls() != before+1 || !strings.HasPrefix(str(sent[1].(map[string]any)["content"]), "Summary of the earlier conversation") {
		t.Errorf("next turn: %d calls, second message %v", srv.Calls()-before, sent[1])
	}
}

func TestSystemRoutes(t *testing.T) {
	ag := loadAgent(t, "support-desk")
	e := start(t, runtime.Options{Agent: ag, DeployID: "d123", Env: func(name string) (string, bool) {
		if name == "STATUS_API_URL" {
			return "https://status.example.com", true
		}
		if name == "STATUS_API_TOKEN" {
			return "secret-value", true
		}
		return "", false
	}})
	h := e.do("GET", "/health", "", nil)
	delete(h.JSON, "connections") // their checks run on their own; TestSupportDeskActs reads them
	if d := cmp.Diff(map[string]any{"status": "ok", "deployId": "d123", "agent": "support-desk", "version": "1.4.0"}, h.JSON); d != "" {
		t.Errorf("health (-want +got):\n%s", d)
	}
	c := e.do("GET", "/inspect/context", "", nil)
	if !strings.Contains(str(c.JSON["system_prompt"]), "{{context.plan}}") || !cmp.Equal(c.JSON["tools"], []any{"load_skill", "load_knowledge", "triage", "refund_request", "request", "store__tickets__get", "store__tickets__set", "store__tickets__query", "store__tickets__delete", "store__tickets__history", "handoff"}) {
		t.Errorf("inspect/context = %s", c.Body)
	}
	if c := e.do("GET", "/inspect/context?agent=billing", "", nil); c.JSON["agent"] != "billing" || !cmp.Equal(c.JSON["tools"], []any{"load_knowledge", "store__tickets__get", "store__tickets__query", "store__tickets__history", "handoff"}) {
		t.Errorf("inspect/context billing = %s", c.Body)
	}
	if c := e.do("GET", "/inspect/context?agent=nobody", "", nil); c.Status != 400 || c.JSON["field"] != "agent" {
		t.Errorf("unknown agent: %d %s", c.Status, c.Body)
	}
	conn := e.do("GET", "/inspect/connections/status", "", nil)
	if conn.Status != 200 || strings.Contains(string(conn.Body), "secret-value") || !strings.Contains(string(conn.Body), "env:STATUS_API_TOKEN") {
		t.Errorf("inspect/connections = %s", conn.Body)
	}
	if spec := conn.JSON["spec"].(map[string]any); spec["baseUrl"] != "https://status.example.com" || spec["baseUrlRef"] != "env:STATUS_API_URL" {
		t.Errorf("spec = %v", spec)
	}
	if r := e.do("GET", "/inspect/connections/nope", "", nil); r.Status != 404 {
		t.Errorf("unknown connection: %d", r.Status)
	}
	if r := e.do("GET", "/sessions/pending-approvals", "", nil); r.Status != 200 || !cmp.Equal(r.JSON["sessions"], []any{}) {
		t.Errorf("pending approvals: %s", r.Body)
	}
	// A route no handler takes answers the runtime's JSON error, not plain text.
	if r := e.do("GET", "/no/such/route", "", nil); r.Status != 404 || r.JSON["error"] != "not_found" || !strings.Contains(r.JSON["message"].(string), "GET /no/such/route") {
		t.Errorf("unknown route: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/chat/sync", "", nil); r.Status != 405 || r.JSON["error"] != "method_not_allowed" || r.Header.Get("Allow") != "POST" {
		t.Errorf("GET /chat/sync: %d %v %s", r.Status, r.Header, r.Body)
	}
}

func TestEventBus(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	resp, err := e.srv.Client().Do(e.request("GET", "/api/events", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	got := make(chan []frame, 1)
	go func() { got <- readFrames(t, resp.Body, 1) }()
	// The subscription exists once the headers are flushed; publish until it is read.
	sent := 0
	for {
		e.rt.Publish(&sse.Frame{Type: sse.TypeSessionUpdated, SessionID: "s1", Status: "cancelled", ToolName: "refund_request"})
		sent++
		select {
		case fs := <-got:
			if len(fs) != 1 || fs[0].typ() != "session_updated" || fs[0].Data["session_id"] != "s1" || fs[0].Data["tool_name"] != "refund_request" {
				t.Fatalf("event = %v", fs)
			}
			return
		case <-time.After(10 * time.Millisecond):
			if sent > 1000 {
				t.Fatal("no event received")
			}
		}
	}
}

func TestCloseEndsEventStreams(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	resp, err := e.srv.Client().Do(e.request("GET", "/api/events", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := e.rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fs := readFrames(t, resp.Body, -1) // returns at EOF: the runtime ended the stream
	if len(fs) != 0 {
		t.Errorf("frames %v", types(fs))
	}
}
