package evals

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/sse"
)

func TestDecode(t *testing.T) {
	frames := []sse.Frame{
		{Type: sse.TypeInit, SessionID: "s1"},
		{Type: sse.TypeTextDelta, Content: "Let me "},
		{Type: sse.TypeToolCallStart, ToolID: "a", ToolName: "triage", Parameters: json.RawMessage(`{"q":1}`)},
		{Type: sse.TypeToolCallStart, ToolID: "b", ToolName: "refund_request", Parameters: json.RawMessage(`{}`)},
		{Type: sse.TypeToolCallResult, ToolID: "b", Status: sse.StatusError, Error: "over limit"},
		{Type: sse.TypeToolCallResult, ToolID: "a", Status: sse.StatusSuccess, Result: json.RawMessage(`{"ok":true}`), Content: "ok"},
		{Type: sse.TypeToolCallResult, ToolID: "z", Status: sse.StatusSuccess}, // no start
		{Type: sse.TypeSkillActivated, SkillName: "refunds"},
		{Type: sse.TypeTextDelta, Content: "check."},
		{Type: sse.TypeError, Message: "model failed"},
		{Type: sse.TypeDone, Reason: "error", Usage: &sse.Usage{InputTokens: 7, OutputTokens: 3}},
	}
	want := turn{
		Text: "Let me check.",
		ToolCalls: []*ToolCall{
			{ID: "a", Name: "triage", Parameters: json.RawMessage(`{"q":1}`), Status: "success", Result: json.RawMessage(`{"ok":true}`), Content: "ok"},
			{ID: "b", Name: "refund_request", Parameters: json.RawMessage(`{}`), Status: "error", Error: "over limit"},
			{ID: "z", Status: "success"},
		},
		Skills:     []string{"refunds"},
		DoneReason: "error",
		Tokens:     10, // no total_tokens: input + output
		Errors:     []string{"model failed"},
	}
	if diff := cmp.Diff(want, decode(frames)); diff != "" {
		t.Errorf("decode (-want +got):\n%s", diff)
	}
}

func TestStringArg(t *testing.T) {
	for _, tt := range []struct{ params, want string }{
		{`{"connection":"forecast"}`, "forecast"},
		{`{"connection":3}`, ""},
		{`{}`, ""},
		{`not json`, ""},
		{``, ""},
	} {
		if got := stringArg(json.RawMessage(tt.params), "connection"); got != tt.want {
			t.Errorf("stringArg(%s) = %q, want %q", tt.params, got, tt.want)
		}
	}
}
