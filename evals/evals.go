package evals

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc/agent"
	"svc/runner/models"
)

// ChatRequest is one message sent to a fresh session of the deployment under test.
type ChatRequest struct {
	Message  string
	Context  map[string]string // the eval's "Context:" line
	Metadata map[string]string // {"source": "eval"}
	// MaxSessionTokens bounds the session's tokens; 0 leaves the deployment's own limit.
	MaxSessionTokens int
	// AllowWrites are the connections the eval lets the agent write to (its "Allow writes:").
	AllowWrites []string
}

// ChatFunc runs req as the first turn of a new session and returns what the turn did. It is
// called from Run's goroutine, one call at a time. An error means the turn could not run (the
// run's assertions become errors); a turn that ran and failed is a transcript with its error and
// done frames. When ctx ends it returns promptly.
type ChatFunc func(ctx context.Context, req ChatRequest) (Transcript, error)

// Params configures Run. Zero values are documented defaults.
type Params struct {
	Evals []*agent.Eval
	Chat  ChatFunc
	// Runs is how many times each eval runs; 0 means 1. An eval passes when every assertion
	// passes in every run.
	Runs int
	// MaxSessionTokens is passed on in every ChatRequest; 0 leaves the deployment's limit.
	MaxSessionTokens int
	// Judge grades the assertions no rule recognises, with JudgeModel (""is the provider's
	// default). A nil Judge makes those assertions errors.
	Judge      models.Provider
	JudgeModel string
	// Now is the clock of durations; nil means time.Now.
	Now func() time.Time
}

// Status is the outcome of an assertion, a run or an eval.
type Status string

// Statuses. An eval or run fails when an assertion fails; it is an error when none failed and
// one could not be judged (the chat or the judge failed, or the verdict was malformed).
const (
	StatusPass  Status = "pass"
	StatusFail  Status = "fail"
	StatusError Status = "error"
)

// State is the overall outcome, the state of the svc/evals commit status.
type State string

// States: failure when any eval failed; else error when any eval errored; else success (no
// evals is a success).
const (
	StateSuccess State = "success"
	StateFailure State = "failure"
	StateError   State = "error"
)

// Method is how an assertion was judged.
type Method string

// Methods.
const (
	ByRule  Method = "rule"
	ByJudge Method = "judge"
)

// Result is the outcome of Run.
type Result struct {
	State State
	Evals []EvalResult // in the order of Params.Evals
}

// EvalResult is the outcome of one eval over its runs.
type EvalResult struct {
	Name   string
	Title  string
	Status Status
	// Assertions are the eval's assertions over all runs: each passes when it passed in every
	// run; otherwise it carries the first failing (then erroring) run's status and reason.
	Assertions []AssertionResult
	Runs       []RunResult
	Tokens     int // all runs' chat and judge tokens
	Duration   time.Duration
}

// RunResult is one run of an eval: one fresh session.
type RunResult struct {
	SessionID  string
	Status     Status
	Error      string // why the chat could not run, when it could not
	Assertions []AssertionResult
	ChatTokens int // the done frame's usage
	// JudgeTokens are the judge call's tokens (0 when every assertion was judged by a rule).
	JudgeTokens int
	Duration    time.Duration
}

// AssertionResult is one assertion's verdict.
type AssertionResult struct {
	Text   string
	By     Method
	Status Status
	Reason string
}

// Run runs every eval Params.Runs times, one after the other, and grades each run. The error is
// for a call Run cannot make (no Chat) or ctx's end; the Result then holds the evals finished so
// far, and an eval cut short is left out.
func Run(ctx context.Context, p Params) (Result, error) {
	if p.Chat == nil {
		return Result{}, errors.New("evals: Params.Chat is nil")
	}
	if p.Runs <= 0 {
		p.Runs = 1
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	res := Result{State: StateSuccess}
	for _, e := range p.Evals {
		er, err := runEval(ctx, &p, e)
		if err != nil {
			res.State = overall(res.Evals)
			return res, err
		}
		res.Evals = append(res.Evals, er)
	}
	res.State = overall(res.Evals)
	return res, nil
}

// overall is the state of a set of eval results.
func overall(evals []EvalResult) State {
	state := StateSuccess
	for _, e := range evals {
		switch e.Status {
		case StatusFail:
			return StateFailure
		case StatusError:
			state = StateError
		}
	}
	return state
}

// runEval runs e p.Runs times.
func runEval(ctx context.Context, p *Params, e *agent.Eval) (EvalResult, error) {
	start := p.Now()
	er := EvalResult{Name: e.Name, Title: e.Title}
	for range p.Runs {
		rr, err := runOnce(ctx, p, e)
		if err != nil {
			return er, fmt.Errorf("evals: eval %s: %w", e.Name, err)
		}
		er.Runs = append(er.Runs, rr)
		er.Tokens += rr.ChatTokens + rr.JudgeTokens
	}
	er.Assertions = combine(er.Runs)
	er.Status = worst(er.Assertions, StatusPass)
	for _, r := range er.Runs {
		er.Status = worstOf(er.Status, r.Status)
	}
	er.Duration = p.Now().Sub(start)
	return er, nil
}

// runOnce runs e in one fresh session and grades it.
func runOnce(ctx context.Context, p *Params, e *agent.Eval) (RunResult, error) {
	start := p.Now()
	rr := RunResult{}
	tr, err := p.Chat(ctx, ChatRequest{
		Message:          e.Query,
		Context:          e.Context,
		Metadata:         map[string]string{"source": "eval"},
		MaxSessionTokens: p.MaxSessionTokens,
		AllowWrites:      e.AllowWrites,
	})
	if err != nil {
		if ctx.Err() != nil {
			return rr, fmt.Errorf("chat: %w", context.Cause(ctx))
		}
		rr.Error = "chat: " + err.Error()
		rr.Assertions = make([]AssertionResult, len(e.Assertions))
		for i, a := range e.Assertions {
			rr.Assertions[i] = AssertionResult{Text: a.Text, By: method(a), Status: StatusError, Reason: "the chat did not run: " + err.Error()}
		}
		rr.Status = StatusError
		rr.Duration = p.Now().Sub(start)
		return rr, nil
	}
	rr.SessionID = tr.SessionID
	t := decode(tr.Frames)
	rr.ChatTokens = t.Tokens

	rr.Assertions = make([]AssertionResult, len(e.Assertions))
	var judged []int // indexes of the assertions left to the judge
	var texts []string
	for i, a := range e.Assertions {
		pass, reason, ok := ruleVerdict(a, &t)
		if !ok {
			judged = append(judged, i)
			texts = append(texts, a.Text)
			rr.Assertions[i] = AssertionResult{Text: a.Text, By: ByJudge}
			continue
		}
		status := StatusFail
		if pass {
			status = StatusPass
		}
		rr.Assertions[i] = AssertionResult{Text: a.Text, By: ByRule, Status: status, Reason: reason}
	}
	if len(judged) > 0 {
		var verdicts []verdict
		if p.Judge == nil {
			verdicts = allError(len(judged), "no rule recognises this assertion and no judge model is configured")
		} else {
			verdicts, rr.JudgeTokens, err = judge(ctx, p, e.Query, &t, texts)
			if err != nil {
				return rr, err
			}
		}
		for j, i := range judged {
			rr.Assertions[i].Status, rr.Assertions[i].Reason = verdicts[j].status, verdicts[j].reason
		}
	}
	rr.Status = worst(rr.Assertions, StatusPass)
	rr.Duration = p.Now().Sub(start)
	return rr, nil
}

// method is how a would be judged, for an assertion that was not (the chat failed).
func method(a agent.Assertion) Method {
	if _, _, ok := ruleVerdict(a, &turn{}); ok {
		return ByRule
	}
	return ByJudge
}

// worst is the worst status of as, starting from s: fail over error over pass.
func worst(as []AssertionResult, s Status) Status {
	for _, a := range as {
		s = worstOf(s, a.Status)
	}
	return s
}

// worstOf orders statuses fail > error > pass.
func worstOf(a, b Status) Status {
	rank := func(s Status) int {
		switch s {
		case StatusFail:
			return 2
		case StatusError:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// combine folds the runs' verdicts per assertion: pass when it passed in every run, else the
// worst run's status and reason (the first run with it), the reason prefixed with the run.
func combine(runs []RunResult) []AssertionResult {
	if len(runs) == 0 {
		return nil
	}
	out := make([]AssertionResult, len(runs[0].Assertions))
	copy(out, runs[0].Assertions)
	for i := range out {
		out[i].Status, out[i].Reason = StatusPass, runs[0].Assertions[i].Reason
		for n, r := range runs {
			a := r.Assertions[i]
			if worstOf(out[i].Status, a.Status) != out[i].Status {
				out[i].Status = a.Status
				out[i].Reason = a.Reason
				if len(runs) > 1 {
					out[i].Reason = fmt.Sprintf("run %d: %s", n+1, a.Reason)
				}
			}
		}
	}
	return out
}
