package runtime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/models"
	"svc/runner/runtime"
	"svc/runner/tools"
)

// desk writes an agent with two named agents: default (ask_user, load_knowledge) and billing
// (load_knowledge), and returns a runtime of it on the echo model.
func desk(t *testing.T, extra ...tools.Tool) *env {
	t.Helper()
	dir := agenttest.Write(t, map[string]string{
		"svc.json":                  `{"name": "desk", "version": "1"}`,
		"agents/default/AGENT.md":   "You are the front desk.",
		"agents/default/agent.json": `{"name": "default", "tools": ["ask_user", "load_knowledge"]}`,
		"agents/billing/AGENT.md":   "You are billing.",
		"agents/billing/agent.json": `{"name": "billing", "tools": ["load_knowledge"]}`,
		"knowledge/plans.md":        "# Plans\n\nPro and Team.",
	})
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return start(t, runtime.Options{Agent: ag, ExtraTools: extra, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
}

// ask_user streams ask_choice and ends the turn; the choice comes back as the next message.
func TestAskUser(t *testing.T) {
	e := desk(t)
	fs := e.chat("", map[string]any{"message": `/tool ask_user {"question": "Which plan?", "options": [{"value": "pro", "label": "Pro"}, {"value": "team", "label": "Team"}]}`})
	asks := ofType(fs, "ask_choice")
	if len(asks) != 1 {
		t.Fatalf("frames %v: want one ask_choice", types(fs))
	}
	a := asks[0].Data
	opts, _ := a["options"].([]any)
	if !strings.HasPrefix(str(a["ask_id"]), "ask_") || a["question"] != "Which plan?" || len(opts) != 2 || a["multi"] != nil {
		t.Errorf("ask_choice %v", a)
	}
	if d := done(t, fs); d["reason"] != "model_stop" || num(d["turns"]) != 1 {
		t.Errorf("done %v: the question ends the run after one model call", d)
	}
	if got := types(fs); slices.Index(got, "ask_choice") > slices.Index(got, "tool_call_result") {
		t.Errorf("ask_choice after the call's result: %v", got)
	}
	// The choice is the next chat message of the session.
	fs = e.chat("", map[string]any{"message": "pro", "session_id": sessionOf(t, fs)})
	if text(fs) != "echo: pro" {
		t.Errorf("the answer to the choice: %q", text(fs))
	}
	// Bad arguments are an error result naming the field, and the run goes on.
	fs = e.chat("", map[string]any{"message": `/tool ask_user {"question": "Q", "options": []}`})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 || res[0].Data["status"] != "error" || str(res[0].Data["error"]) != "invalid arguments for ask_user: options: must have at least 1 item, got 0" || len(ofType(fs, "ask_choice")) != 0 {
		t.Errorf("empty options: %v", res)
	}
}

// handoff switches the session's agent from the next model call on, and for later turns.
func TestHandoff(t *testing.T) {
	e := desk(t)
	fs := e.chat("", map[string]any{"message": `/tool handoff {"agent": "billing"}`})
	h := ofType(fs, "agent_handoff")
	if len(h) != 1 {
		t.Fatalf("frames %v: want one agent_handoff", types(fs))
	}
	removed, _ := h[0].Data["removed_tools"].([]any)
	if h[0].Data["from"] != "default" || h[0].Data["to"] != "billing" || !slices.Equal(removed, []any{"ask_user"}) {
		t.Errorf("agent_handoff %v", h[0].Data)
	}
	id := sessionOf(t, fs)
	if r := e.do("GET", "/sessions/history/"+id, "", nil); r.JSON["agent"] != "billing" {
		t.Errorf("the session's agent after the handoff: %v", r.JSON["agent"])
	}
	r := e.do("GET", "/inspect/context?session_id="+id, "", nil)
	if !strings.Contains(str(r.JSON["system_prompt"]), "You are billing.") {
		t.Errorf("the next turn's prompt is not billing's: %q", r.JSON["system_prompt"])
	}
	// Billing has one other agent to hand back to; an unknown agent is an error result.
	fs = e.chat("", map[string]any{"message": `/tool handoff {"agent": "nobody"}`, "session_id": id})
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "error" || len(ofType(fs, "agent_handoff")) != 0 {
		t.Errorf("handoff to an unknown agent: %v", types(fs))
	}
}

// widgety is a host tool whose result carries a widget.
type widgety struct{}

func (widgety) Spec() models.ToolSpec {
	return models.ToolSpec{Name: "order_card", Description: "Shows an order.", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (widgety) Call(context.Context, tools.Call) (tools.Result, error) {
	return tools.Result{Content: "order 7 shown", Widget: &tools.Widget{Type: "order", Data: json.RawMessage(`{"id":7}`)}}, nil
}

// A tool result's widget streams as a widget frame right after the call's result.
func TestWidget(t *testing.T) {
	e := desk(t, widgety{})
	fs := e.chat("", map[string]any{"message": `/tool order_card {}`})
	got := types(fs)
	i := slices.Index(got, "widget")
	if i < 1 || got[i-1] != "tool_call_result" {
		t.Fatalf("frames %v: want widget right after tool_call_result", got)
	}
	w := ofType(fs, "widget")[0].Data
	if w["widget_type"] != "order" || w["data"].(map[string]any)["id"] != float64(7) {
		t.Errorf("widget %v", w)
	}
	// /chat/sync and the AI SDK stream carry it too.
	if r := e.do("POST", "/chat/ai-stream", "", map[string]any{"message": `/tool order_card {}`}); r.Status != http.StatusOK || !strings.Contains(string(r.Body)+rawFrames(r), `data-widget`) {
		t.Errorf("ai-stream: %d %s", r.Status, r.Body)
	}
}

func rawFrames(r *response) string {
	var b strings.Builder
	for _, f := range r.Frames {
		b.WriteString(f.Raw)
	}
	return b.String()
}
