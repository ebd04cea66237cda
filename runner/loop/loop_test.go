package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/sse"
	"svc/runner/tools"
)

// frames is a loop.Sink that keeps copies of what it receives; failAfter > 0 makes the
// failAfter-th frame fail, as a gone client does.
type frames struct {
	mu        sync.Mutex
	list      []sse.Frame
	failAfter int
	onFrame   func(f *sse.Frame)
}

func (s *frames) Emit(f *sse.Frame) error {
	s.mu.Lock()
	s.list = append(s.list, *f)
	n := len(s.list)
	s.mu.Unlock()
	if s.onFrame != nil {
		s.onFrame(f)
	}
	if s.failAfter > 0 && n >= s.failAfter {
		return errors.New("client gone")
	}
	return nil
}

func (s *frames) types() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, f := range s.list {
		out = append(out, string(f.Type))
	}
	return out
}

func (s *frames) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, f := range s.list {
		if f.Type == sse.TypeTextDelta {
			b.WriteString(f.Content)
		}
	}
	return b.String()
}

func (s *frames) of(t sse.Type) []sse.Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sse.Frame
	for _, f := range s.list {
		if f.Type == t {
			out = append(out, f)
		}
	}
	return out
}

func user(text string) models.Message { return models.Message{Role: models.RoleUser, Content: text} }

func desk(t *testing.T) *agent.Agent {
	t.Helper()
	ag, err := agent.LoadDir(agenttest.Dir(t, "support-desk"))
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

func openai(t *testing.T, script ...modelstest.Turn) (models.Provider, *modelstest.Server) {
	t.Helper()
	srv := modelstest.NewOpenAIServer(t, script...)
	p, err := models.New(models.Config{Provider: models.ProviderOpenAI, Model: "gpt-4o", BaseURL: srv.URL, APIKey: "sk-test"}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return p, srv
}

// requestMessages returns the messages of the i-th request a fake server received.
func requestMessages(t *testing.T, srv *modelstest.Server, i int) []map[string]any {
	t.Helper()
	reqs := srv.Requests()
	if i >= len(reqs) {
		t.Fatalf("server got %d requests, want more than %d", len(reqs), i)
	}
	var out []map[string]any
	for _, m := range reqs[i].JSON["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

func TestEchoModelStop(t *testing.T) {
	sink := &frames{}
	res := loop.Run(context.Background(), &loop.Params{
		Provider: models.Echo{}, ProviderName: "echo", System: "sys",
		History: []models.Message{user("earlier"), {Role: models.RoleAssistant, Content: "echo: earlier"}},
		Input:   []models.Message{user("hello there world")}, Sink: sink,
	})
	if res.Reason != loop.ReasonModelStop || res.Turns != 1 || res.Err != nil || res.Interrupted {
		t.Fatalf("result = %+v", res)
	}
	if got := sink.text(); got != "echo: hello there world" {
		t.Errorf("streamed text = %q", got)
	}
	want := []models.Message{user("hello there world"), {Role: models.RoleAssistant, Content: "echo: hello there world"}}
	if d := cmp.Diff(want, res.Messages); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if res.Usage.OutputTokens != 4 || res.Usage.InputTokens == 0 {
		t.Errorf("usage = %+v", res.Usage)
	}
}

func TestToolCallsFeedBack(t *testing.T) {
	ag := desk(t)
	sel := tools.ForAgent(ag, ag.Agents["default"], tools.Extensions{})
	sink := &frames{}
	var skills, docs []string
	var mu sync.Mutex
	res := loop.Run(context.Background(), &loop.Params{
		Provider: models.Echo{}, Tools: sel.Set, Sink: sink,
		Input:       []models.Message{user(`/tool load_skill {"name":"refunds"}`)},
		OnSkill:     func(n string) { mu.Lock(); skills = append(skills, n); mu.Unlock() },
		OnKnowledge: func(n string) { mu.Lock(); docs = append(docs, n); mu.Unlock() },
	})
	if res.Reason != loop.ReasonModelStop || res.Turns != 2 {
		t.Fatalf("result = %+v", res)
	}
	wantTypes := []string{"tool_call_start", "skill_activated", "tool_call_result", "text_delta"}
	if got := sink.types(); len(got) < 4 || !cmp.Equal(wantTypes, got[:4]) {
		t.Errorf("frame types = %v, want prefix %v", got, wantTypes)
	}
	start := sink.of(sse.TypeToolCallStart)[0]
	if start.ToolName != "load_skill" || start.RunningLabel != "Loading skill refunds" || string(start.Parameters) != `{"name":"refunds"}` {
		t.Errorf("tool_call_start = %+v", start)
	}
	result := sink.of(sse.TypeToolCallResult)[0]
	if result.Status != sse.StatusSuccess || result.ToolID != start.ToolID || !strings.HasPrefix(result.Content, "# Skill: refunds") {
		t.Errorf("tool_call_result = %+v", result)
	}
	if !cmp.Equal([]string{"refunds"}, skills) || docs != nil {
		t.Errorf("skills %v docs %v", skills, docs)
	}
	roles := []models.Role{}
	for _, m := range res.Messages {
		roles = append(roles, m.Role)
	}
	if d := cmp.Diff([]models.Role{"user", "assistant", "tool", "assistant"}, roles); d != "" {
		t.Errorf("roles (-want +got):\n%s", d)
	}
	if !strings.HasPrefix(res.Messages[3].Content, "echo: # Skill: refunds") {
		t.Errorf("final answer = %q", res.Messages[3].Content)
	}
}

func TestUnknownToolIsAnErrorResult(t *testing.T) {
	sink := &frames{}
	res := loop.Run(context.Background(), &loop.Params{
		Provider: models.Echo{}, Sink: sink, Input: []models.Message{user(`/tool triage {"subject":"x"}`)},
	})
	if res.Reason != loop.ReasonModelStop {
		t.Fatalf("reason = %s", res.Reason)
	}
	r := sink.of(sse.TypeToolCallResult)[0]
	if r.Status != sse.StatusError || !strings.Contains(r.Error, `tool "triage" is not available`) {
		t.Errorf("tool_call_result = %+v", r)
	}
	if tm := res.Messages[2]; tm.Role != models.RoleTool || !tm.IsError {
		t.Errorf("tool message = %+v", tm)
	}
}

// funcTool is a test tool whose behaviour is a function.
type funcTool struct {
	name string
	fn   func(ctx context.Context, c tools.Call) (tools.Result, error)
}

func (f funcTool) Spec() models.ToolSpec {
	return models.ToolSpec{Name: f.name, Description: "test", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (f funcTool) Call(ctx context.Context, c tools.Call) (tools.Result, error) { return f.fn(ctx, c) }

func TestParallelToolCalls(t *testing.T) {
	// Both calls must be running at once: each waits for the other to start.
	started := make(chan string, 2)
	both := make(chan struct{})
	var once sync.Once
	tool := funcTool{"wait", func(ctx context.Context, c tools.Call) (tools.Result, error) {
		started <- c.ID
		if len(started) == 2 {
			once.Do(func() { close(both) })
		}
		select {
		case <-both:
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		}
		_ = c.Host.Emit(&sse.Frame{Type: sse.TypeToolLog, ToolName: "wait", Message: "done " + c.ID})
		return tools.Result{Content: "ok " + c.ID, Data: json.RawMessage(`{"id":"` + c.ID + `"}`)}, nil
	}}
	p, srv := openai(t,
		modelstest.Turn{ToolCalls: []modelstest.ToolCall{{ID: "a", Name: "wait", Arguments: `{"n":1}`}, {ID: "b", Name: "wait", Arguments: `{"n":2}`}}, Interleave: true},
		modelstest.Turn{Text: []string{"all ", "done"}},
	)
	sink := &frames{}
	res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(tool), Sink: sink, Input: []models.Message{user("go")}})
	if res.Reason != loop.ReasonModelStop || res.Turns != 2 {
		t.Fatalf("result = %+v", res)
	}
	if got := len(sink.of(sse.TypeToolLog)); got != 2 {
		t.Errorf("tool_log frames = %d, want 2", got)
	}
	msgs := requestMessages(t, srv, 1)
	var ids []string
	for _, m := range msgs {
		if m["role"] == "tool" {
			ids = append(ids, m["tool_call_id"].(string)+"="+m["content"].(string))
		}
	}
	if d := cmp.Diff([]string{"a=ok a", "b=ok b"}, ids); d != "" {
		t.Errorf("tool results in the second request (-want +got):\n%s", d)
	}
	for _, r := range sink.of(sse.TypeToolCallResult) {
		if !strings.Contains(string(r.Result), r.ToolID) {
			t.Errorf("result frame %+v lacks structured result", r)
		}
	}
}

func TestToolPanicAndEndRun(t *testing.T) {
	boom := funcTool{"boom", func(context.Context, tools.Call) (tools.Result, error) { panic("kaboom") }}
	stop := funcTool{"stop", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "handed off", EndRun: true}, nil
	}}
	set := tools.NewSet(boom, stop)
	sink := &frames{}
	res := loop.Run(context.Background(), &loop.Params{Provider: models.Echo{}, Tools: set, Sink: sink, Input: []models.Message{user("/tool boom")}})
	if r := sink.of(sse.TypeToolCallResult)[0]; r.Status != sse.StatusError || !strings.Contains(r.Error, "internal error") {
		t.Errorf("panic result = %+v", r)
	}
	if res.Reason != loop.ReasonModelStop || res.Turns != 2 {
		t.Errorf("after panic: %+v", res)
	}
	res = loop.Run(context.Background(), &loop.Params{Provider: models.Echo{}, Tools: set, Sink: &frames{}, Input: []models.Message{user("/tool stop")}})
	if res.Reason != loop.ReasonModelStop || res.Turns != 1 {
		t.Errorf("EndRun: %+v", res)
	}
}

func alwaysTool(usage int) modelstest.Turn {
	return modelstest.Turn{ToolCalls: []modelstest.ToolCall{{ID: "c", Name: "noop", Arguments: `{}`}},
		Usage: modelstest.Usage{InputTokens: usage / 2, OutputTokens: usage - usage/2}}
}

var noop = funcTool{"noop", func(context.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: "ok"}, nil }}

func TestMaxTurnsSummary(t *testing.T) {
	// Three tool turns, then the summary turn (which asks for a tool call too: it is not run).
	p, srv := openai(t, alwaysTool(10), alwaysTool(10), alwaysTool(10),
		modelstest.Turn{Text: []string{"I did three things."}, ToolCalls: []modelstest.ToolCall{{ID: "x", Name: "noop", Arguments: `{}`}}})
	sink := &frames{}
	res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(noop), MaxTurns: 3, Sink: sink, Input: []models.Message{user("go")}})
	if res.Reason != loop.ReasonMaxTurns || res.Turns != 3 {
		t.Fatalf("result = %+v", res)
	}
	if srv.Calls() != 4 {
		t.Errorf("model calls = %d, want 4 (3 turns + summary)", srv.Calls())
	}
	if got := len(sink.of(sse.TypeToolCallStart)); got != 3 {
		t.Errorf("tool calls run = %d, want 3 (the summary's call is not run)", got)
	}
	if sink.text() != "I did three things." {
		t.Errorf("text = %q", sink.text())
	}
	last := requestMessages(t, srv, 3)
	if c, _ := last[len(last)-1]["content"].(string); !strings.Contains(c, "limit of 3 model turns") || !strings.Contains(c, "what they should say") {
		t.Errorf("summary instruction = %q", c)
	}
	if m := res.Messages[len(res.Messages)-1]; m.Role != models.RoleAssistant || m.Content != "I did three things." || len(m.ToolCalls) != 0 {
		t.Errorf("last message = %+v", m)
	}
	if res.Usage.Total() != 30 {
		t.Errorf("usage total = %d, want 30", res.Usage.Total())
	}
}

func TestMaxTurnsSummaryFailsOrEmpty(t *testing.T) {
	for name, summary := range map[string]modelstest.Turn{
		"fails": {Status: http.StatusBadRequest, ErrorMessage: "nope"},
		"empty": {Text: nil},
	} {
		t.Run(name, func(t *testing.T) {
			p, _ := openai(t, alwaysTool(1), alwaysTool(1), summary)
			sink := &frames{}
			res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(noop), MaxTurns: 2, Sink: sink, Input: []models.Message{user("go")}})
			want := loop.FixedMessage(loop.ReasonMaxTurns, 2, 0)
			if res.Reason != loop.ReasonMaxTurns || sink.text() != want {
				t.Fatalf("reason %s, text %q; want max_turns, %q", res.Reason, sink.text(), want)
			}
			if len(sink.of(sse.TypeError)) != 0 {
				t.Error("a failed summary must not emit an error frame")
			}
			if got := res.Messages[len(res.Messages)-1].Content; got != want {
				t.Errorf("recorded %q", got)
			}
		})
	}
}

func TestTurnLimitOneMakesNoSummary(t *testing.T) {
	p, srv := openai(t, alwaysTool(1))
	res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(noop), MaxTurns: 1, Sink: &frames{}, Input: []models.Message{user("go")}})
	if res.Reason != loop.ReasonMaxTurns || srv.Calls() != 1 {
		t.Fatalf("reason %s, calls %d; want max_turns, 1", res.Reason, srv.Calls())
	}
	// Subagents make none either.
	p, srv = openai(t, alwaysTool(1))
	res = loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(noop), MaxTurns: 2, Subagent: true, Sink: &frames{}, Input: []models.Message{user("go")}})
	if res.Reason != loop.ReasonMaxTurns || srv.Calls() != 2 {
		t.Fatalf("subagent: reason %s, calls %d; want max_turns, 2", res.Reason, srv.Calls())
	}
}

func TestBudget(t *testing.T) {
	t.Run("over at start", func(t *testing.T) {
		p, srv := openai(t)
		sink := &frames{}
		res := loop.Run(context.Background(), &loop.Params{Provider: p, Budget: 100, Used: 100, Sink: sink, Input: []models.Message{user("hi")}})
		if res.Reason != loop.ReasonBudgetExceeded || res.Turns != 0 || srv.Calls() != 0 {
			t.Fatalf("result %+v, calls %d", res, srv.Calls())
		}
		if want := loop.FixedMessage(loop.ReasonBudgetExceeded, 0, 100); sink.text() != want {
			t.Errorf("text = %q, want %q", sink.text(), want)
		}
	})
	t.Run("just under at start", func(t *testing.T) {
		p, srv := openai(t)
		res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Budget: 100, Used: 99, Sink: &frames{}, Input: []models.Message{user("hi")}})
		if res.Reason != loop.ReasonModelStop || srv.Calls() != 1 {
			t.Fatalf("result %+v, calls %d", res, srv.Calls())
		}
	})
	t.Run("between steps", func(t *testing.T) {
		p, srv := openai(t, alwaysTool(100), alwaysTool(100), modelstest.Turn{Text: []string{"Summary: need a new conversation."}, Usage: modelstest.Usage{InputTokens: 5, OutputTokens: 5}})
		sink := &frames{}
		res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(noop), Budget: 250, Used: 50, Sink: sink, Input: []models.Message{user("go")}})
		// 50 + 100 = 150 < 250: a second step; 50 + 200 = 250 >= 250: stop, then the summary.
		if res.Reason != loop.ReasonBudgetExceeded || res.Turns != 2 || srv.Calls() != 3 {
			t.Fatalf("result %+v, calls %d", res, srv.Calls())
		}
		last := requestMessages(t, srv, 2)
		if c, _ := last[len(last)-1]["content"].(string); !strings.Contains(c, "new conversation") {
			t.Errorf("summary instruction = %q", c)
		}
		if sink.text() != "Summary: need a new conversation." || res.Usage.Total() != 210 {
			t.Errorf("text %q, usage %d", sink.text(), res.Usage.Total())
		}
	})
}

func TestModelError(t *testing.T) {
	p, _ := openai(t, modelstest.Turn{Status: http.StatusBadRequest, ErrorMessage: "bad model"})
	sink := &frames{}
	res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Sink: sink, Input: []models.Message{user("hi")}})
	if res.Reason != loop.ReasonError || res.Err == nil {
		t.Fatalf("result = %+v", res)
	}
	errs := sink.of(sse.TypeError)
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "bad model") {
		t.Errorf("error frames = %+v", errs)
	}
}

func TestClientGoneIsUserAbort(t *testing.T) {
	// The sink fails on the second text delta: the model call is cancelled mid-stream.
	p, _ := openai(t, modelstest.Turn{Text: []string{"one ", "two ", "three"}, Hang: true})
	sink := &frames{failAfter: 2}
	res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Sink: sink, Input: []models.Message{user("hi")}})
	if res.Reason != loop.ReasonUserAbort || !res.Interrupted {
		t.Fatalf("result = %+v", res)
	}
	last := res.Messages[len(res.Messages)-1]
	if last.Role != models.RoleAssistant || last.Content != "one two " {
		t.Errorf("interrupted message = %+v, want the partial text", last)
	}
}

func TestCancelledDuringToolsIsUserAbort(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	block := funcTool{"block", func(ctx context.Context, c tools.Call) (tools.Result, error) {
		cancel(loop.ErrUserAbort)
		<-ctx.Done()
		return tools.Result{}, context.Cause(ctx)
	}}
	p, srv := openai(t, modelstest.Turn{ToolCalls: []modelstest.ToolCall{{ID: "c", Name: "block", Arguments: `{}`}}})
	res := loop.Run(ctx, &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(block), Sink: &frames{}, MaxTurns: 5, Input: []models.Message{user("hi")}})
	if res.Reason != loop.ReasonUserAbort || srv.Calls() != 1 {
		t.Fatalf("result %+v, calls %d", res, srv.Calls())
	}
	n := len(res.Messages)
	if res.Messages[n-2].Role != models.RoleTool || res.Messages[n-1].Role != models.RoleAssistant || res.Messages[n-1].Content != "" {
		t.Errorf("messages = %+v; want the tool result then an empty interrupted assistant message", res.Messages)
	}
}

func TestQueuedMessages(t *testing.T) {
	q := loop.NewQueue()
	// A message queued during a tool call is read before the next step.
	during := funcTool{"noop", func(context.Context, tools.Call) (tools.Result, error) {
		if !q.Push(user("also this")) {
			t.Error("Push refused during the run")
		}
		return tools.Result{Content: "ok"}, nil
	}}
	p, srv := openai(t, alwaysTool(1), modelstest.Turn{Text: []string{"first answer"}}, modelstest.Turn{Text: []string{"second answer"}})
	pushed := false
	sink := &frames{}
	// A message queued while the final answer streams keeps the run going for one more step.
	sink.onFrame = func(f *sse.Frame) {
		if f.Type == sse.TypeTextDelta && f.Content == "first answer" && !pushed {
			pushed = true
			q.Push(user("and one more"))
		}
	}
	res := loop.Run(context.Background(), &loop.Params{Provider: p, Model: "gpt-4o", Tools: tools.NewSet(during), Queue: q, Sink: sink, Input: []models.Message{user("go")}})
	if res.Reason != loop.ReasonModelStop || res.Turns != 3 || srv.Calls() != 3 {
		t.Fatalf("result %+v, calls %d", res, srv.Calls())
	}
	second := requestMessages(t, srv, 1)
	if c := second[len(second)-1]["content"]; c != "also this" {
		t.Errorf("second request ends with %v, want the queued message", c)
	}
	third := requestMessages(t, srv, 2)
	if c := third[len(third)-1]["content"]; c != "and one more" {
		t.Errorf("third request ends with %v", c)
	}
	if q.Push(user("late")) {
		t.Error("Push accepted after the run ended")
	}
}
