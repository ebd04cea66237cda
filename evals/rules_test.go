package evals

import (
	"encoding/json"
	"testing"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/sse"
	"svc/runner/tools"
)

func TestToolNamesMatchTheRuntime(t *testing.T) {
	for _, c := range []struct{ ours, runtime string }{
		{toolLoadSkill, tools.NameLoadSkill},
		{toolLoadKnowledge, tools.NameLoadKnowledge},
		{toolRequest, connections.ToolName},
	} {
		if c.ours != c.runtime {
			t.Errorf("tool name %q, the runtime's is %q", c.ours, c.runtime)
		}
	}
}

// call returns the start and result frames of a successful tool call.
func call(id, name, params string) []sse.Frame {
	return []sse.Frame{
		{Type: sse.TypeToolCallStart, ToolID: id, ToolName: name, Parameters: json.RawMessage(params)},
		{Type: sse.TypeToolCallResult, ToolID: id, Status: sse.StatusSuccess, Result: json.RawMessage(`{}`)},
	}
}

func TestRules(t *testing.T) {
	var frames []sse.Frame
	frames = append(frames, call("1", "refund_request", `{"amount":10}`)...)
	frames = append(frames, call("2", "request", `{"connection":"forecast","method":"GET","path":"/today"}`)...)
	frames = append(frames, call("3", "store__tickets__set", `{"id":"t1"}`)...)
	frames = append(frames, call("4", "store__order_log__query", `{}`)...)
	frames = append(frames, call("5", "load_knowledge", `{"name":"refund-policy"}`)...)
	frames = append(frames, call("6", "load_skill", `{"name":"refunds"}`)...)
	frames = append(frames, call("7", "request", `{"connection":"crm","method":"POST","path":"/notes"}`)...)
	frames = append(frames,
		sse.Frame{Type: sse.TypeSkillActivated, SkillName: "triage"},
		sse.Frame{Type: sse.TypeTextDelta, Content: "Done."},
		sse.Frame{Type: sse.TypeDone, Reason: "max_turns", Usage: &sse.Usage{TotalTokens: 42}},
	)
	tr := decode(frames)

	tests := []struct {
		text     string
		negative bool
		want     bool // pass
	}{
		{"Should call refund_request", false, true},
		{"Should call `refund_request`.", false, true},
		{"Should NOT call refund_request", true, false},
		{"Should not call triage", true, true},
		{"should never call triage", false, true},
		{"Must call the triage tool", false, false},
		{"Should use the refund_request tool", false, true},
		{"Should use the tickets tool", false, true},  // a store tool of store tickets
		{"Should use the forecast tool", false, true}, // the request tool with connection forecast
		{"Should call the forecast connection", false, true},
		{"Should use refund_request", false, true},
		{"Should use `forecast`", false, true},
		{"Should read the forecast", false, true},
		{"Should read from the order-log store", false, true}, // hyphen as underscore
		{"Should read the tickets store", false, false},       // only a write of tickets
		{"Should read the crm", false, true},                  // any request call of the connection
		{"Should write to the tickets store", false, true},
		{"Should NOT write to the order_log store", true, true},
		{"Should write to the forecast", false, false}, // a GET is no write
		{"Should write to crm", false, true},           // a POST is
		{"Should load the refunds skill", false, true},
		{"Should load the triage skill", false, true}, // skill_activated
		{"Should activate the billing skill", false, false},
		{"Should load the refund-policy knowledge document", false, true},
		{"Should read the plans knowledge document", false, false},
		{"Should end with max_turns", false, true},
		{"Should end with max turns", false, true},
		{"Should end with complete", false, false},
		{"Should NOT end with error", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			pass, reason, ok := ruleVerdict(agent.Assertion{Text: tt.text, Negative: tt.negative}, &tr)
			if !ok {
				t.Fatalf("no rule recognises %q", tt.text)
			}
			if pass != tt.want {
				t.Errorf("pass = %v (%s), want %v", pass, reason, tt.want)
			}
			if reason == "" {
				t.Error("no reason")
			}
		})
	}
}

func TestRulesLeaveTheRestToTheJudge(t *testing.T) {
	tr := decode(nil)
	for _, text := range []string{
		"Should say that monthly plans are not refundable",
		"Should NOT promise an amount before the refund_request tool returns",
		"Should use a friendly tone",
		"Should use empathy",
		"Should call the customer by name",
		"Should read the policy carefully",
		"Should check availability",
		"The answer is short",
		"Should",
	} {
		if _, _, ok := ruleVerdict(agent.Assertion{Text: text}, &tr); ok {
			t.Errorf("a rule recognises %q; want it left to the judge", text)
		}
	}
}

func TestEndWithoutDoneFrame(t *testing.T) {
	tr := decode(nil)
	pass, reason, ok := ruleVerdict(agent.Assertion{Text: "Should end with complete"}, &tr)
	if !ok || pass {
		t.Errorf("ruleVerdict = %v, %q, %v; want a failure", pass, reason, ok)
	}
}
