package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/sse"
	"svc/runner/tools"
)

func TestToolResultClearing(t *testing.T) {
	var history []models.Message
	for i := range 17 {
		id := fmt.Sprintf("c%d", i)
		history = append(history,
			models.Message{Role: models.RoleAssistant, ToolCalls: []models.ToolCall{{ID: id, Name: "noop", Arguments: json.RawMessage(`{}`)}}},
			models.Message{Role: models.RoleTool, ToolCallID: id, ToolName: "noop", Content: fmt.Sprintf("result number %d", i)})
	}
	p, srv := openai(t, modelstest.Turn{Text: []string{"ok"}})
	res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(noop), History: history, Sink: &frames{}, Input: []models.Message{user("next")}})
	if res.Reason != loop.ReasonModelStop {
		t.Fatal(res.Reason)
	}
	var contents []string
	for _, m := range requestMessages(t, srv, 0) {
		if m["role"] == "tool" {
			contents = append(contents, m["content"].(string))
		}
	}
	if len(contents) != 17 {
		t.Fatalf("%d tool results sent, want 17", len(contents))
	}
	for i, c := range contents {
		cleared := strings.HasPrefix(c, "[tool result cleared")
		if want := i < 12; cleared != want {
			t.Errorf("tool result %d cleared = %v, want %v (%q)", i, cleared, want, c)
		}
	}
	// 15 results: nothing is cleared.
	p, srv = openai(t, modelstest.Turn{Text: []string{"ok"}})
	loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(noop), History: history[4:], Sink: &frames{}, Input: []models.Message{user("next")}})
	for _, m := range requestMessages(t, srv, 0) {
		if c, _ := m["content"].(string); strings.HasPrefix(c, "[tool result cleared") {
			t.Errorf("with 15 tool results, %q was cleared", c)
		}
	}
}

func longHistory(users int) []models.Message {
	var h []models.Message
	for i := range users {
		h = append(h, user(fmt.Sprintf("question %d %s", i, strings.Repeat("x", 400))),
			models.Message{Role: models.RoleAssistant, Content: fmt.Sprintf("answer %d %s", i, strings.Repeat("y", 400))})
	}
	return h
}

func TestCompaction(t *testing.T) {
	p, srv := openai(t,
		modelstest.Turn{Text: []string{"The user asked two questions."}, Usage: modelstest.Usage{InputTokens: 300, OutputTokens: 10}},
		modelstest.Turn{Text: []string{"answer"}},
	)
	sink := &frames{}
	history := longHistory(8) // 8 user turns of ~200 tokens each with their answers
	res := loop.Run(context.Background(), &loop.Params{
		Provider: p, Model: "gpt-4o", System: "sys", ContextWindow: 1000, History: history, Sink: sink, Input: []models.Message{user("q8")},
	})
	if res.Reason != loop.ReasonModelStop {
		t.Fatal(res.Reason)
	}
	starts, ends := sink.of(sse.TypeCompactionStart), sink.of(sse.TypeCompactionEnd)
	if len(starts) != 1 || len(ends) != 1 {
		t.Fatalf("compaction frames: %d starts, %d ends", len(starts), len(ends))
	}
	if starts[0].Threshold != 900 || starts[0].EstimatedTokens <= 900 {
		t.Errorf("compaction_start = %+v", starts[0])
	}
	if ends[0].TokensBefore != starts[0].EstimatedTokens || ends[0].TokensAfter >= ends[0].TokensBefore || ends[0].CompactionTokens != 310 {
		t.Errorf("compaction_end = %+v", ends[0])
	}
	// Kept: the latest 6 user turns (5 from history + the input); covered: 3 user turns and their answers.
	if !res.Compacted || res.Covered != 6 || res.Summary != "The user asked two questions." {
		t.Errorf("compacted %v covered %d summary %q", res.Compacted, res.Covered, res.Summary)
	}
	summaryReq := requestMessages(t, srv, 0)
	if c := summaryReq[len(summaryReq)-1]["content"].(string); !strings.Contains(c, "question 0") || strings.Contains(c, "question 3") {
		t.Errorf("summarised transcript should hold turns 0-2 only: %.200q", c)
	}
	msgs := requestMessages(t, srv, 1)
	if c := msgs[1]["content"].(string); !strings.Contains(c, "The user asked two questions.") {
		t.Errorf("first message after the system prompt = %q, want the summary", c)
	}
	var users int
	for _, m := range msgs[2:] {
		if m["role"] == "user" {
			users++
		}
	}
	if users != 6 {
		t.Errorf("user turns kept verbatim = %d, want 6", users)
	}
	if res.Usage.Total() < 310 {
		t.Errorf("usage %+v does not count the compaction call", res.Usage)
	}
}

func TestCompactionStopsAfterThreeFailures(t *testing.T) {
	fail := modelstest.Turn{Status: http.StatusBadRequest, ErrorMessage: "no summary"}
	p, srv := openai(t, fail, alwaysTool(1), fail, alwaysTool(1), fail, alwaysTool(1), modelstest.Turn{Text: []string{"done"}})
	sink := &frames{}
	res := loop.Run(context.Background(), &loop.Params{
		Provider: p, Model: "gpt-4o", ContextWindow: 1000, History: longHistory(8), Tools: tools.NewSet(noop), Sink: sink, Input: []models.Message{user("go")},
	})
	if res.Reason != loop.ReasonModelStop || res.Compacted {
		t.Fatalf("result %+v", res)
	}
	warnings := sink.of(sse.TypeWarning)
	if len(warnings) != 3 || !strings.Contains(warnings[2].Message, "compaction is off") {
		t.Fatalf("warnings = %+v", warnings)
	}
	if srv.Calls() != 7 || res.Turns != 4 {
		t.Errorf("calls %d turns %d; want 7 and 4 (no fourth compaction attempt)", srv.Calls(), res.Turns)
	}
}

func TestPrompt(t *testing.T) {
	ag := desk(t)
	sel := tools.ForAgent(ag, ag.Agents["default"], tools.Extensions{})
	p := loop.Prompt{BasePrompt: ag.Config.BasePrompt, Instructions: ag.Agents["default"].Instructions, Knowledge: sel.Knowledge, Skills: sel.Skills}
	compiled := p.Compile()
	for _, want := range []string{
		"You are the support desk of Acme.", "{{context.plan}}", "# Support desk",
		"- plans: The plans Acme sells and what each includes.", "- refunds: the customer asks for money back",
	} {
		if !strings.Contains(compiled, want) {
			t.Errorf("compiled prompt lacks %q:\n%s", want, compiled)
		}
	}
	filled := loop.Fill(compiled, map[string]string{"plan": "team"})
	if !strings.Contains(filled, "The customer's plan is team.") {
		t.Errorf("filled prompt: %s", filled)
	}
	if got := loop.Fill("a {{context.missing}} b {{ context.k }} {{other}} {{context.}} {{", map[string]string{"k": "v"}); got != "a  b v {{other}} {{context.}} {{" {
		t.Errorf("Fill = %q", got)
	}
	p.Active = ag.Skills["refunds"]
	if c := p.Compile(); !strings.Contains(c, "## Active skill: refunds") || !strings.Contains(c, "Never refund a monthly plan") {
		t.Errorf("skill-scoped prompt lacks the skill:\n%s", c)
	}
	if c := (loop.Prompt{}).Compile(); c != loop.DefaultBasePrompt {
		t.Errorf("empty prompt = %q", c)
	}
}
