package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEvalsGateTheRelease: a git-source support-desk agent on a fake OpenAI model. Its first
// commit fails one eval (the agent refunds a monthly plan; the judge says so) and passes the
// other (a rule sees load_knowledge(refund-policy), the judge passes the rest): the commit's
// svc/evals status goes pending, then failure, and promoting its preview deployment to
// production is refused with 422 EVAL_GATE_BLOCKED while the evals are pending and once they
// failed, unless forced. The run lists each eval with its runs, each assertion's verdict and
// reason, and each run's session, which the runtime's history route shows with metadata
// source: eval. A fix pushed to the branch (a line of AGENT.md) goes pending, then success, and
// is promoted without force.
func TestEvalsGateTheRelease(t *testing.T) {
	p := startPlatform(t)
	model := newFakeEvalModel(t, false, true)
	a := newEvalsAgent(t, p, "gated-desk", model, false)

	// The first commit: built on the preview branch, active there; its evals start and are held.
	c1 := a.commit(t, "refunds, first try", nil)
	d1 := p.push(t, a.id, a.dir, evalsBranch, c1)
	waitFor(t, model.started, "the first model call of the evals")
	// The evals are running (the pending status was recorded before they were queued): the gate is shut.
	checkStatusSequence(t, p, a.id, c1, "pending")
	if status, code, _ := promoteEvals(t, p, a.id, false); status != 422 || code != "EVAL_GATE_BLOCKED" {
		t.Errorf("promote while the evals are pending: %d %s", status, code)
	}
	model.release()
	run1 := waitEvalRun(t, p, d1)
	checkStatusSequence(t, p, a.id, c1, "pending", "failure")
	if run1.State != "failure" || run1.Result.State != "failure" || run1.Commit != c1 || run1.DeployID != d1 {
		t.Fatalf("first run: %+v", run1)
	}
	want1 := map[string]evalWant{
		"no-monthly-refund": {"fail", []assertionView{
			{"Should say that monthly plans are not refundable", "judge", "fail", "fake judge: the answer does not (sure, last month is refunded.)"},
			{"Should NOT call refund_request", "rule", "pass", "no call of refund_request; no tool calls"},
		}},
		"refund-annual": {"pass", []assertionView{
			{"Should load the refund-policy knowledge document", "rule", "pass", "called load_knowledge(name=refund-policy) success"},
			{"Should say that the refund is possible in full", "judge", "pass", "fake judge: the answer does so"},
			{"Should NOT promise an amount before the refund_request tool returns", "judge", "pass", "fake judge: the answer does so"},
		}},
	}
	sessions1 := checkEvalRun(t, run1, want1)

	// Each run's session is a session of the deployment, readable through its history route,
	// marked as an eval's.
	token := runtimeToken(t, p, a.id)
	queries := map[string]string{
		"no-monthly-refund": "Refund last month please, I did not use it.",
		"refund-annual":     "I bought the annual plan ten days ago and want a refund.",
	}
	for name, id := range sessions1 {
		var h struct {
			SessionID string            `json:"session_id"`
			Metadata  map[string]string `json:"metadata"`
			Messages  []struct{ Role, Content string }
		}
		agentGet(t, p, d1+"--"+a.slug, "/sessions/history/"+id, token, &h)
		if h.SessionID != id || h.Metadata["source"] != "eval" || len(h.Messages) < 2 ||
			h.Messages[0].Role != "user" || h.Messages[0].Content != queries[name] {
			t.Errorf("eval %s: session %s: %+v", name, id, h)
		}
	}

	// Failing: refused, and force overrides.
	if status, code, _ := promoteEvals(t, p, a.id, false); status != 422 || code != "EVAL_GATE_BLOCKED" {
		t.Errorf("promote after failing evals: %d %s", status, code)
	}
	if status, code, commit := promoteEvals(t, p, a.id, true); status != 200 || commit != c1 {
		t.Fatalf("forced promotion: %d %s %s", status, code, commit)
	}

	// The fix, pushed to the branch: pending, then success; promoted without force.
	c2 := a.commit(t, "refunds: say that monthly plans are not refundable", func(dir string) {
		path := filepath.Join(dir, "agents", "default", "AGENT.md")
		b, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(path, append(b, "\n"+fixMarker+"\n"...), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	d2 := p.push(t, a.id, a.dir, evalsBranch, c2)
	run2 := waitEvalRun(t, p, d2)
	checkStatusSequence(t, p, a.id, c2, "pending", "success")
	checkStatusSequence(t, p, a.id, c1, "pending", "failure") // the first commit's are unchanged
	if run2.State != "success" || run2.Result.State != "success" || run2.Commit != c2 {
		t.Fatalf("second run: %+v", run2)
	}
	want2 := map[string]evalWant{
		"no-monthly-refund": {"pass", []assertionView{
			{"Should say that monthly plans are not refundable", "judge", "pass", "fake judge: the answer does so"},
			want1["no-monthly-refund"].assertions[1],
		}},
		"refund-annual": want1["refund-annual"],
	}
	sessions2 := checkEvalRun(t, run2, want2)
	for name, id := range sessions2 {
		if id == sessions1[name] {
			t.Errorf("eval %s ran in the first run's session %s", name, id)
		}
	}
	if status, code, commit := promoteEvals(t, p, a.id, false); status != 200 || commit != c2 {
		t.Errorf("promotion after the fix: %d %s %s", status, code, commit)
	}
	var active struct{ Commit, PromotedFrom string }
	if s := p.call(t, "GET", "/api/agents/"+a.id+"/active-deployment?environment=production", nil, nil, &active); s != 200 || active.Commit != c2 {
		t.Errorf("production serves %d %+v, want commit %s", s, active, c2)
	}
	// Two evals per run, each a chat (the annual one two model calls: the tool call, then the
	// answer) and a judge call (refund-annual's rule assertion is not the judge's).
	if chats, judges, _ := model.counts(); chats != 6 || judges != 4 {
		t.Errorf("model calls: %d chat, %d judge; want 6 and 4", chats, judges)
	}
}

// evalWant is what an eval's result should say.
type evalWant struct {
	status     string
	assertions []assertionView
}

// checkEvalRun checks a run's evals against want (by name, in name order), each with one run
// whose session id is set and whose assertions are the eval's; it returns each eval's session.
func checkEvalRun(t *testing.T, run evalRunView, want map[string]evalWant) map[string]string {
	t.Helper()
	sessions := map[string]string{}
	var names []string
	for _, e := range run.Result.Evals {
		names = append(names, e.Name)
		w, ok := want[e.Name]
		if !ok {
			continue
		}
		if e.Status != w.status || !slices.Equal(e.Assertions, w.assertions) {
			t.Errorf("eval %s: %s %+v\nwant %s %+v", e.Name, e.Status, e.Assertions, w.status, w.assertions)
		}
		if len(e.Runs) != 1 {
			t.Errorf("eval %s: %d runs", e.Name, len(e.Runs))
			continue
		}
		r := e.Runs[0]
		if r.SessionID == "" || r.Status != w.status || r.Error != "" || !slices.Equal(r.Assertions, w.assertions) || r.ChatTokens == 0 || e.Tokens == 0 {
			t.Errorf("eval %s: run %+v", e.Name, r)
		}
		sessions[e.Name] = r.SessionID
	}
	if !slices.Equal(names, []string{"no-monthly-refund", "refund-annual"}) {
		t.Errorf("evals %v", names)
	}
	return sessions
}

// TestEvalMalformedVerdictIsAnError: the judge answers prose where the JSON verdict was asked
// for. The tree is the fixed one, which a well-formed judge passes (TestEvalsGateTheRelease),
// and the rule-judged assertions pass: yet every judged assertion is an error, so each eval is
// an error, the run and the commit's svc/evals status are error, never success, and the gate
// stays shut.
func TestEvalMalformedVerdictIsAnError(t *testing.T) {
	p := startPlatform(t)
	model := newFakeEvalModel(t, true, false)
	a := newEvalsAgent(t, p, "malformed-desk", model, true)
	c := a.commit(t, "refunds", nil)
	d := p.push(t, a.id, a.dir, evalsBranch, c)
	run := waitEvalRun(t, p, d)
	checkStatusSequence(t, p, a.id, c, "pending", "error")
	if run.State != "error" || run.Result.State != "error" {
		t.Fatalf("run %+v", run)
	}
	for _, e := range run.Result.Evals {
		if e.Status != "error" || len(e.Runs) != 1 || e.Runs[0].Status != "error" || e.Runs[0].SessionID == "" {
			t.Errorf("eval %s: %s %+v", e.Name, e.Status, e.Runs)
		}
		for _, as := range e.Assertions {
			switch {
			case as.By == "rule" && as.Status != "pass":
				t.Errorf("eval %s: rule assertion %+v", e.Name, as)
			case as.By == "judge" && (as.Status != "error" || !strings.HasPrefix(as.Reason, "malformed verdict: ")):
				t.Errorf("eval %s: judged assertion %+v", e.Name, as)
			}
		}
	}
	if len(run.Result.Evals) != 2 {
		t.Errorf("evals %+v", run.Result.Evals)
	}
	if status, code, _ := promoteEvals(t, p, a.id, false); status != 422 || code != "EVAL_GATE_BLOCKED" {
		t.Errorf("promote after erroring evals: %d %s", status, code)
	}
	if _, judges, _ := model.counts(); judges != 2 {
		t.Errorf("%d judge calls, want 2", judges)
	}
}
