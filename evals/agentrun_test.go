package evals_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/evals"
	"svc/runner/models"
	"svc/runner/sse"
)

// TestRunAgentChoosesTheJudge: the configured judge model wins, then the agent's main model, then
// the default; a judge that cannot be opened is an error with no result.
func TestRunAgentChoosesTheJudge(t *testing.T) {
	withMain, err := agent.LoadDir("../testdata/agents/support-desk") // main: echo/echo
	if err != nil {
		t.Fatal(err)
	}
	noMain := *withMain
	noMain.Config.Models = nil
	judge, def := agent.ModelRef{Provider: "openai", Model: "judge-1"}, agent.ModelRef{Provider: "openai", Model: "default-1"}
	for _, tt := range []struct {
		name  string
		agent *agent.Agent
		judge agent.ModelRef
		want  agent.ModelRef
	}{
		{"configured", withMain, judge, judge},
		{"agent's main model", withMain, agent.ModelRef{}, agent.ModelRef{Provider: "echo", Model: "echo"}},
		{"default", &noMain, agent.ModelRef{}, def},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got agent.ModelRef
			cannot := errors.New("cannot open")
			state, out, err := evals.RunAgent(t.Context(), evals.AgentParams{
				Agent: tt.agent, JudgeModel: tt.judge, DefaultModel: def, Chat: (&fakeChat{}).chat,
				Models: func(ref agent.ModelRef) (models.Provider, error) { got = ref; return nil, cannot },
			})
			if !errors.Is(err, cannot) || state != "" || out != nil {
				t.Errorf("RunAgent = %q, %s, %v; want no result and the judge's error", state, out, err)
			}
			if got != tt.want {
				t.Errorf("judge = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRunAgentRunsEveryEvalByName runs the fixture's evals in the order of their names and
// returns the state with the result as JSON.
func TestRunAgentRunsEveryEvalByName(t *testing.T) {
	a, err := agent.LoadDir("../testdata/agents/support-desk")
	if err != nil {
		t.Fatal(err)
	}
	chat := &fakeChat{scripts: map[string][][]sse.Frame{
		monthlyQuery: {turnFrames("Monthly plans are not refundable.")},
		annualQuery:  {annualPass()},
	}}
	_, judge := newJudge(t,
		judgeTurn(`{"verdicts": [{"index": 1, "pass": true, "reason": "says so"}]}`),
		judgeTurn(`{"verdicts": [{"index": 1, "pass": true, "reason": "in full"}, {"index": 2, "pass": true, "reason": "no amount"}]}`),
	)
	state, out, err := evals.RunAgent(t.Context(), evals.AgentParams{
		Agent: a, Chat: chat.chat, Models: func(agent.ModelRef) (models.Provider, error) { return judge, nil },
	})
	if err != nil || state != evals.StateSuccess {
		t.Fatalf("RunAgent = %q, %v; want success", state, err)
	}
	var res evals.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range res.Evals {
		names = append(names, e.Name)
	}
	if diff := cmp.Diff([]string{"no-monthly-refund", "refund-annual"}, names); diff != "" {
		t.Errorf("evals (-want +got):\n%s", diff)
	}
	if len(chat.reqs) != 2 || chat.reqs[0].Message != monthlyQuery {
		t.Errorf("chat requests = %+v, want the monthly query first", chat.reqs)
	}
}
