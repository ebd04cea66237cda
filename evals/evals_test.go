package evals_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/evals"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/sse"
)

// fixtureEvals are the support-desk fixture's evals, sorted by name: no-monthly-refund,
// refund-annual.
func fixtureEvals(t *testing.T) []*agent.Eval {
	t.Helper()
	a, err := agent.LoadDir("../testdata/agents/support-desk")
	if err != nil {
		t.Fatal(err)
	}
	var out []*agent.Eval
	for _, name := range slices.Sorted(maps.Keys(a.Evals)) {
		out = append(out, a.Evals[name])
	}
	if len(out) != 2 || out[0].Name != "no-monthly-refund" || out[1].Name != "refund-annual" {
		t.Fatalf("fixture evals changed: %v", slices.Sorted(maps.Keys(a.Evals)))
	}
	return out
}

// fakeChat answers each query with the next scripted transcript for it and records the requests.
type fakeChat struct {
	mu      sync.Mutex
	scripts map[string][][]sse.Frame // query → transcripts, one per call
	reqs    []evals.ChatRequest
	err     error
}

func (f *fakeChat) chat(_ context.Context, req evals.ChatRequest) (evals.Transcript, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if f.err != nil {
		return evals.Transcript{}, f.err
	}
	script := f.scripts[req.Message]
	if len(script) == 0 {
		return evals.Transcript{}, fmt.Errorf("no script for %q", req.Message)
	}
	frames := script[0]
	f.scripts[req.Message] = script[1:]
	return evals.Transcript{SessionID: fmt.Sprintf("sess-%d", len(f.reqs)), Frames: frames}, nil
}

// toolCall is a successful call's two frames.
func toolCall(id, name, params, result string) []sse.Frame {
	return []sse.Frame{
		{Type: sse.TypeToolCallStart, ToolID: id, ToolName: name, Parameters: json.RawMessage(params)},
		{Type: sse.TypeToolCallResult, ToolID: id, Status: sse.StatusSuccess, Result: json.RawMessage(result)},
	}
}

// turnFrames is a turn: calls, then text, then done with 100 tokens.
func turnFrames(text string, calls ...[]sse.Frame) []sse.Frame {
	var out []sse.Frame
	for _, c := range calls {
		out = append(out, c...)
	}
	return append(out,
		sse.Frame{Type: sse.TypeTextDelta, Content: text},
		sse.Frame{Type: sse.TypeDone, Reason: "complete", Usage: &sse.Usage{InputTokens: 80, OutputTokens: 20, TotalTokens: 100}},
	)
}

const (
	monthlyQuery = "Refund last month please, I did not use it."
	annualQuery  = "I bought the annual plan ten days ago and want a refund."
)

// judgeTurn is a judge answer with 10+5 tokens.
func judgeTurn(answer string) modelstest.Turn {
	return modelstest.Turn{Text: []string{answer}, Usage: modelstest.Usage{InputTokens: 10, OutputTokens: 5}}
}

func newJudge(t *testing.T, turns ...modelstest.Turn) (*modelstest.Server, models.Provider) {
	t.Helper()
	srv := modelstest.NewOpenAIServer(t, turns...)
	return srv, models.NewOpenAI(models.OpenAIConfig{BaseURL: srv.URL, HTTPClient: srv.Client(), Model: "judge-1", MaxRetries: -1})
}

// annualPass is a transcript of refund-annual that passes its rule.
func annualPass() []sse.Frame {
	return turnFrames("Your refund is possible in full; I have filed it.",
		toolCall("c1", "load_knowledge", `{"name":"refund-policy"}`, `{}`),
		toolCall("c2", "refund_request", `{"plan":"annual"}`, `{"amount":120}`))
}

func TestRunSupportDesk(t *testing.T) {
	chat := &fakeChat{scripts: map[string][][]sse.Frame{
		// The agent files a refund for a monthly plan: the rule "Should NOT call refund_request" fails.
		monthlyQuery: {turnFrames("Monthly plans are not refundable, but I filed it anyway.",
			toolCall("c1", "refund_request", `{"plan":"monthly"}`, `{"amount":20}`))},
		annualQuery: {annualPass()},
	}}
	srv, judge := newJudge(t,
		judgeTurn(`{"verdicts": [{"index": 1, "pass": true, "reason": "it says monthly plans are not refundable"}]}`),
		judgeTurn("```json\n"+`{"verdicts": [{"index": 2, "pass": true, "reason": "no amount before the tool returned"}, {"index": 1, "pass": true, "reason": "says in full"}]}`+"\n```"),
	)
	res, err := evals.Run(t.Context(), evals.Params{
		Evals: fixtureEvals(t), Chat: chat.chat, Judge: judge, JudgeModel: "judge-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != evals.StateFailure {
		t.Errorf("State = %s, want failure", res.State)
	}
	got := map[string][]evals.AssertionResult{}
	for _, e := range res.Evals {
		got[e.Name] = e.Assertions
		if len(e.Runs) != 1 || e.Runs[0].SessionID == "" {
			t.Errorf("%s: runs %+v, want one with a session id", e.Name, e.Runs)
		}
		if e.Tokens != 115 {
			t.Errorf("%s: Tokens = %d, want 100 of the chat + 15 of the judge", e.Name, e.Tokens)
		}
	}
	want := map[string][]evals.AssertionResult{
		"no-monthly-refund": {
			{Text: "Should say that monthly plans are not refundable", By: evals.ByJudge, Status: evals.StatusPass, Reason: "it says monthly plans are not refundable"},
			{Text: "Should NOT call refund_request", By: evals.ByRule, Status: evals.StatusFail, Reason: "called refund_request success"},
		},
		"refund-annual": {
			{Text: "Should load the refund-policy knowledge document", By: evals.ByRule, Status: evals.StatusPass, Reason: "called load_knowledge(name=refund-policy) success"},
			{Text: "Should say that the refund is possible in full", By: evals.ByJudge, Status: evals.StatusPass, Reason: "says in full"},
			{Text: "Should NOT promise an amount before the refund_request tool returns", By: evals.ByJudge, Status: evals.StatusPass, Reason: "no amount before the tool returned"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("assertions (-want +got):\n%s", diff)
	}
	if s := res.Evals[0].Status; s != evals.StatusFail {
		t.Errorf("no-monthly-refund: %s, want fail", s)
	}
	if s := res.Evals[1].Status; s != evals.StatusPass {
		t.Errorf("refund-annual: %s, want pass", s)
	}

	// The chat requests carry the eval's context and the eval metadata.
	wantReqs := []evals.ChatRequest{
		{Message: monthlyQuery, Context: map[string]string{"plan": "team"}, Metadata: map[string]string{"source": "eval"}},
		{Message: annualQuery, Context: map[string]string{"plan": "enterprise"}, Metadata: map[string]string{"source": "eval"}},
	}
	if diff := cmp.Diff(wantReqs, chat.reqs); diff != "" {
		t.Errorf("chat requests (-want +got):\n%s", diff)
	}

	// One judge request per run, with the query, the calls, the answer and the numbered
	// assertions left to it.
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("judge requests: %d, want 2", len(reqs))
	}
	prompt := string(reqs[1].Body)
	for _, s := range []string{
		"judge-1", annualQuery, "refund_request", "load_knowledge", "Your refund is possible in full",
		"1. Should say that the refund is possible in full", "2. Should NOT promise an amount",
	} {
		if !strings.Contains(prompt, s) {
			t.Errorf("judge request lacks %q:\n%s", s, prompt)
		}
	}
	if strings.Contains(prompt, "Should load the refund-policy") {
		t.Errorf("judge request holds an assertion a rule judged:\n%s", prompt)
	}
}

func TestRunMalformedVerdictIsAnError(t *testing.T) {
	chat := &fakeChat{scripts: map[string][][]sse.Frame{annualQuery: {annualPass()}}}
	_, judge := newJudge(t, judgeTurn(`The refund is fine. {"verdicts": []}`))
	res, err := evals.Run(t.Context(), evals.Params{Evals: fixtureEvals(t)[1:], Chat: chat.chat, Judge: judge})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Evals[0]
	if res.State != evals.StateError || e.Status != evals.StatusError {
		t.Errorf("State %s, eval %s; want error, error", res.State, e.Status)
	}
	if a := e.Assertions[0]; a.Status != evals.StatusPass {
		t.Errorf("rule assertion %+v, want pass", a)
	}
	for _, a := range e.Assertions[1:] {
		if a.Status != evals.StatusError || !strings.Contains(a.Reason, "malformed verdict") {
			t.Errorf("judged assertion %+v, want an error with a malformed verdict reason", a)
		}
	}
}

// TestRunEchoJudgeSaysAJudgeModelIsNeeded: the echo model repeats the judge's prompt; the
// judged assertions are errors that say how to name a judge model, not "malformed verdict".
func TestRunEchoJudgeSaysAJudgeModelIsNeeded(t *testing.T) {
	chat := &fakeChat{scripts: map[string][][]sse.Frame{annualQuery: {annualPass()}}}
	res, err := evals.Run(t.Context(), evals.Params{Evals: fixtureEvals(t)[1:], Chat: chat.chat, Judge: models.Echo{}, JudgeModel: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Evals[0]
	if res.State != evals.StateError || e.Status != evals.StatusError {
		t.Errorf("State %s, eval %s; want error, error", res.State, e.Status)
	}
	for _, a := range e.Assertions[1:] {
		if a.Status != evals.StatusError || !strings.Contains(a.Reason, "SVC_EVAL_JUDGE_MODEL") || !strings.Contains(a.Reason, "models.main") ||
			strings.Contains(a.Reason, "malformed") {
			t.Errorf("judged assertion %+v, want an error naming SVC_EVAL_JUDGE_MODEL and models.main", a)
		}
	}
}

func TestRunTwoRunsOneFails(t *testing.T) {
	failing := turnFrames("Your refund is possible in full.") // no load_knowledge call
	chat := &fakeChat{scripts: map[string][][]sse.Frame{annualQuery: {annualPass(), failing}}}
	verdict := judgeTurn(`{"verdicts": [{"index": 1, "pass": true, "reason": "ok"}, {"index": 2, "pass": true, "reason": "ok"}]}`)
	_, judge := newJudge(t, verdict, verdict)
	res, err := evals.Run(t.Context(), evals.Params{Evals: fixtureEvals(t)[1:], Chat: chat.chat, Judge: judge, Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Evals[0]
	if res.State != evals.StateFailure || e.Status != evals.StatusFail {
		t.Errorf("State %s, eval %s; want failure, fail", res.State, e.Status)
	}
	if len(e.Runs) != 2 || e.Runs[0].Status != evals.StatusPass || e.Runs[1].Status != evals.StatusFail {
		t.Fatalf("runs %+v, want pass then fail", e.Runs)
	}
	if e.Runs[0].SessionID == e.Runs[1].SessionID {
		t.Errorf("both runs in session %s, want fresh sessions", e.Runs[0].SessionID)
	}
	a := e.Assertions[0]
	if a.Status != evals.StatusFail || !strings.HasPrefix(a.Reason, "run 2: ") {
		t.Errorf("assertion %+v, want a failure of run 2", a)
	}
	if e.Tokens != 2*115 {
		t.Errorf("Tokens = %d, want %d", e.Tokens, 2*115)
	}
}

func TestRunWithoutJudgeOrChat(t *testing.T) {
	chat := &fakeChat{err: errors.New("deployment is not active")}
	res, err := evals.Run(t.Context(), evals.Params{Evals: fixtureEvals(t), Chat: chat.chat})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != evals.StateError {
		t.Errorf("State = %s, want error", res.State)
	}
	for _, e := range res.Evals {
		if e.Runs[0].Error == "" {
			t.Errorf("%s: run has no error", e.Name)
		}
		for _, a := range e.Assertions {
			if a.Status != evals.StatusError {
				t.Errorf("%s: %+v, want error", e.Name, a)
			}
		}
	}

	// No judge: the assertions no rule recognises are errors; the rules still grade.
	chat = &fakeChat{scripts: map[string][][]sse.Frame{annualQuery: {annualPass()}}}
	res, err = evals.Run(t.Context(), evals.Params{Evals: fixtureEvals(t)[1:], Chat: chat.chat})
	if err != nil {
		t.Fatal(err)
	}
	got := []evals.Status{}
	for _, a := range res.Evals[0].Assertions {
		got = append(got, a.Status)
	}
	if diff := cmp.Diff([]evals.Status{evals.StatusPass, evals.StatusError, evals.StatusError}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}

	if _, err := evals.Run(t.Context(), evals.Params{}); err == nil {
		t.Error("Run without Chat: no error")
	}
	if res, err := evals.Run(t.Context(), evals.Params{Chat: chat.chat}); err != nil || res.State != evals.StateSuccess {
		t.Errorf("no evals: %v, %v; want success", res.State, err)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("shutting down")
	chat := func(ctx context.Context, _ evals.ChatRequest) (evals.Transcript, error) {
		cancel(cause)
		return evals.Transcript{}, context.Cause(ctx)
	}
	res, err := evals.Run(ctx, evals.Params{Evals: fixtureEvals(t), Chat: chat})
	if !errors.Is(err, cause) {
		t.Errorf("err = %v, want the cause", err)
	}
	if len(res.Evals) != 0 {
		t.Errorf("evals %+v, want none finished", res.Evals)
	}
}

func TestRunMeasuresWithNow(t *testing.T) {
	var ticks int64
	now := func() time.Time { ticks++; return time.Unix(ticks, 0) } // Run calls Now from one goroutine
	chat := &fakeChat{scripts: map[string][][]sse.Frame{annualQuery: {annualPass(), annualPass()}}}
	res, err := evals.Run(t.Context(), evals.Params{Evals: fixtureEvals(t)[1:], Chat: chat.chat, Runs: 2, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Evals[0]
	// Clock reads: eval start 1, run 1 start 2 end 3, run 2 start 4 end 5, eval end 6.
	if e.Duration != 5*time.Second || e.Runs[0].Duration != time.Second || e.Runs[1].Duration != time.Second {
		t.Errorf("durations: eval %v, runs %v %v; want 5s, 1s, 1s", e.Duration, e.Runs[0].Duration, e.Runs[1].Duration)
	}
}
