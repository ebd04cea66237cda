package sse

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAppendJSONPerType(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := "2026-01-02T03:04:05.000Z"
	cases := []struct {
		name  string
		frame Frame
		want  map[string]any
	}{
		{"init", Frame{Type: TypeInit, SessionID: "s1"}, map[string]any{"session_id": "s1"}},
		{"text", Frame{Type: TypeTextDelta, Content: "hi \"x\""}, map[string]any{"content": "hi \"x\""}},
		{"thinking", Frame{Type: TypeThinkingDelta, Content: "hm"}, map[string]any{"content": "hm"}},
		{"tool start", Frame{Type: TypeToolCallStart, ToolName: "load_skill", ToolID: "c1", Parameters: json.RawMessage(`{"name":"x"}`), RunningLabel: "Loading"},
			map[string]any{"tool_name": "load_skill", "tool_id": "c1", "parameters": map[string]any{"name": "x"}, "running_label": "Loading"}},
		{"tool start bad params", Frame{Type: TypeToolCallStart, ToolName: "t", ToolID: "c1", Parameters: json.RawMessage(`{nope`)},
			map[string]any{"tool_name": "t", "tool_id": "c1", "parameters": map[string]any{}}},
		{"label", Frame{Type: TypeToolLabelUpdate, ToolID: "c1", CompletedLabel: "Done"}, map[string]any{"tool_id": "c1", "completed_label": "Done"}},
		{"result", Frame{Type: TypeToolCallResult, ToolID: "c1", Status: StatusError, Content: "boom", DurationMS: 3, Error: "boom"},
			map[string]any{"tool_id": "c1", "status": "error", "content": "boom", "duration_ms": 3.0, "error": "boom"}},
		{"result json", Frame{Type: TypeToolCallResult, ToolID: "c1", Status: StatusSuccess, Result: json.RawMessage(`[1,2]`)},
			map[string]any{"tool_id": "c1", "status": "success", "result": []any{1.0, 2.0}, "duration_ms": 0.0}},
		{"nested tool start", Frame{Type: TypeToolCallStart, ToolName: "t", ToolID: "c1.1", ParentToolID: "c1"},
			map[string]any{"tool_name": "t", "tool_id": "c1.1", "parameters": map[string]any{}, "parent_tool_id": "c1"}},
		{"nested result", Frame{Type: TypeToolCallResult, ToolID: "c1.1", Status: StatusSuccess, ParentToolID: "c1"},
			map[string]any{"tool_id": "c1.1", "status": "success", "duration_ms": 0.0, "parent_tool_id": "c1"}},
		{"log", Frame{Type: TypeToolLog, ToolName: "t", Message: "step 1"}, map[string]any{"tool_name": "t", "message": "step 1"}},
		{"skill", Frame{Type: TypeSkillActivated, SkillName: "refunds"}, map[string]any{"skill_name": "refunds"}},
		{"ask choice", Frame{Type: TypeAskChoice, AskID: "ask_1", Question: "Which plan?", Options: json.RawMessage(`[{"value":"pro","label":"Pro"}]`)},
			map[string]any{"ask_id": "ask_1", "question": "Which plan?", "options": []any{map[string]any{"value": "pro", "label": "Pro"}}}},
		{"ask choice, multi", Frame{Type: TypeAskChoice, AskID: "ask_2", Question: "Q", Multi: true},
			map[string]any{"ask_id": "ask_2", "question": "Q", "options": []any{}, "multi": true}},
		{"handoff", Frame{Type: TypeAgentHandoff, From: "default", To: "billing", RemovedTools: []string{"triage", "load_skill"}},
			map[string]any{"from": "default", "to": "billing", "removed_tools": []any{"triage", "load_skill"}}},
		{"handoff, nothing removed", Frame{Type: TypeAgentHandoff, From: "", To: "billing"},
			map[string]any{"from": "", "to": "billing", "removed_tools": []any{}}},
		{"widget", Frame{Type: TypeWidget, WidgetType: "order_card", Data: json.RawMessage(`{"id":7}`)},
			map[string]any{"widget_type": "order_card", "data": map[string]any{"id": float64(7)}}},
		{"confirmation required", Frame{Type: TypeConfirmationRequired, CorrelationID: "apr_1", ToolName: "request", ToolID: "call_1", Endpoint: "/refunds", Method: "POST", ApprovalReason: "writes need approval", Parameters: json.RawMessage(`{"a":1}`), ConnectionName: "billing"},
			map[string]any{"correlation_id": "apr_1", "tool_name": "request", "tool_id": "call_1", "endpoint": "/refunds", "method": "POST", "reason": "writes need approval", "escalated": false, "params": map[string]any{"a": float64(1)}, "connection_name": "billing"}},
		{"subagent tool call", Frame{Type: TypeSubagentEvent, ParentToolID: "call_1", AgentName: "billing", EventType: "tool_call", ToolName: "load_knowledge", ToolArgs: json.RawMessage(`{"name":"plans"}`)},
			map[string]any{"parent_tool_id": "call_1", "agent_name": "billing", "event_type": "tool_call", "tool_name": "load_knowledge", "tool_args": map[string]any{"name": "plans"}}},
		{"subagent text", Frame{Type: TypeSubagentEvent, ParentToolID: "call_1", AgentName: "billing", EventType: "text", Text: "yes"},
			map[string]any{"parent_tool_id": "call_1", "agent_name": "billing", "event_type": "text", "text": "yes"}},
		{"approved", Frame{Type: TypeApproved, ResourceType: "tool_call", PreviewID: "apr_1", ToolID: "call_1"},
			map[string]any{"resource_type": "tool_call", "preview_id": "apr_1", "tool_id": "call_1"}},
		{"denied by timeout", Frame{Type: TypeDenied, ResourceType: "tool_call", PreviewID: "apr_1", TimedOut: true},
			map[string]any{"resource_type": "tool_call", "preview_id": "apr_1", "timeout": true}},
		{"input redacted", Frame{Type: TypeInputRedacted, Text: "mail [redacted email]"}, map[string]any{"text": "mail [redacted email]"}},
		{"compaction start", Frame{Type: TypeCompactionStart, EstimatedTokens: 95, Threshold: 90}, map[string]any{"estimated_tokens": 95.0, "threshold": 90.0}},
		{"compaction end", Frame{Type: TypeCompactionEnd, TokensBefore: 95, TokensAfter: 20, CompactionTokens: 30},
			map[string]any{"tokens_before": 95.0, "tokens_after": 20.0, "compaction_tokens": 30.0}},
		{"warning", Frame{Type: TypeWarning, Message: "careful"}, map[string]any{"message": "careful"}},
		{"error", Frame{Type: TypeError, Message: "bad"}, map[string]any{"message": "bad"}},
		{"done", Frame{Type: TypeDone, Reason: "model_stop", Turns: 2, Usage: &Usage{1, 2, 0, 3}},
			map[string]any{"reason": "model_stop", "turns": 2.0, "usage": map[string]any{"input_tokens": 1.0, "output_tokens": 2.0, "cached_tokens": 0.0, "total_tokens": 3.0}}},
		{"durable approval", Frame{Type: TypeDurableApproval, SessionID: "dur_1", ToolName: "refund", Question: "Approve?", Options: json.RawMessage(`[{"value":"yes","label":"Yes"}]`), AllowEdits: true},
			map[string]any{"session_id": "dur_1", "tool_name": "refund", "question": "Approve?", "options": []any{map[string]any{"value": "yes", "label": "Yes"}}, "allow_edits": true}},
		{"session updated", Frame{Type: TypeSessionUpdated, SessionID: "s", Status: "cancelled", ToolName: "refund"},
			map[string]any{"session_id": "s", "status": "cancelled", "tool_name": "refund"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := AppendJSON(nil, &c.frame, now)
			var got map[string]any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("AppendJSON = %s: not JSON: %v", raw, err)
			}
			want := map[string]any{"type": string(c.frame.Type), "timestamp": ts}
			for k, v := range c.want {
				want[k] = v
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("frame (-want +got):\n%s", d)
			}
		})
	}
}

func BenchmarkAppendJSONTextDelta(b *testing.B) {
	f := Frame{Type: TypeTextDelta, Content: "Hello, this is a chunk of text "}
	buf := make([]byte, 0, 256)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], &f, now)
	}
}
