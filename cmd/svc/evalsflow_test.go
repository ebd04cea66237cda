package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/agent/agenttest"
	"svc/builder/gittest"
)

// fixMarker is the line the "fix" commit adds to the support desk's AGENT.md. The fake model
// reads it in the system prompt and then says what the no-monthly-refund eval wants said.
const fixMarker = "Monthly plans are never refunded: tell the customer so (policy FIX-1)."

// evalsBranch is the preview branch the evals tests push to; its deployments serve (and are
// promoted) from evalsEnv.
const (
	evalsBranch = "feature/refunds"
	evalsEnv    = "preview-" + evalsBranch
)

// fakeEvalModel is a fake OpenAI Chat Completions API (streamed, as the openai provider asks)
// that plays both sides of an eval run of the support-desk agent:
//
//   - the agent: on "I bought the annual plan ..." it calls load_knowledge(refund-policy), then
//     says the refund is possible in full; on "Refund last month ..." it refunds anyway, unless
//     the system prompt holds fixMarker, when it says monthly plans are not refundable;
//   - the judge (its system prompt asks for {"verdicts": [...]}, evals/judge.go): it reads the
//     "## Answer text" and the numbered "## Assertions" of the prompt and grades each assertion
//     from the answer's text, or, when malformed is set, answers prose instead of the JSON.
//
// It answers at once. busy is the time spent in its handler, after hold, over all requests.
type fakeEvalModel struct {
	URL       string
	malformed bool

	hold      chan struct{} // requests wait until it is closed (release)
	holdOnce  sync.Once
	started   chan struct{} // closed at the first request
	startOnce sync.Once

	mu      sync.Mutex
	chats   int
	judges  int
	busy    time.Duration
	answers []string // every judge answer, in order
}

// newFakeEvalModel starts the fake; with held, its requests wait until release is called. The
// server is closed (and held requests released) when the test ends.
func newFakeEvalModel(tb testing.TB, malformed, held bool) *fakeEvalModel {
	tb.Helper()
	f := &fakeEvalModel{malformed: malformed, hold: make(chan struct{}), started: make(chan struct{})}
	if !held {
		f.release()
	}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = srv.URL + "/v1"
	tb.Cleanup(func() {
		f.release()
		srv.Close()
	})
	return f
}

// release lets held requests go on.
func (f *fakeEvalModel) release() { f.holdOnce.Do(func() { close(f.hold) }) }

// counts returns the chat and judge requests so far and the time spent answering them.
func (f *fakeEvalModel) counts() (chats, judges int, busy time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.chats, f.judges, f.busy
}

type fakeMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

// text is a message's content: a string, or the text of its parts.
func (m fakeMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct{ Type, Text string }
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (f *fakeEvalModel) serve(w http.ResponseWriter, r *http.Request) {
	f.startOnce.Do(func() { close(f.started) })
	select {
	case <-f.hold:
	case <-r.Context().Done():
		return
	}
	start := time.Now()
	defer func() {
		f.mu.Lock()
		f.busy += time.Since(start)
		f.mu.Unlock()
	}()
	body, err := io.ReadAll(r.Body)
	var req struct {
		Messages []fakeMessage `json:"messages"`
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || r.URL.Path != "/v1/chat/completions" || len(req.Messages) == 0 {
		http.Error(w, fmt.Sprintf(`{"error":{"message":"fake: bad request %s: %v"}}`, r.URL.Path, err), http.StatusBadRequest)
		return
	}
	system := ""
	if req.Messages[0].Role == "system" {
		system = req.Messages[0].text()
	}
	last := req.Messages[len(req.Messages)-1]
	var query string
	for _, m := range req.Messages {
		if m.Role == "user" {
			query = m.text()
			break
		}
	}
	sw := &sseWriter{w: w}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	sw.delta(map[string]any{"role": "assistant", "content": ""})
	switch {
	case strings.Contains(system, `{"verdicts"`): // the judge (evals/judge.go)
		answer := f.verdict(last.text())
		f.mu.Lock()
		f.judges++
		f.answers = append(f.answers, answer)
		f.mu.Unlock()
		sw.delta(map[string]any{"content": answer})
		sw.finish("stop")
	case strings.Contains(query, "annual plan") && last.Role == "user":
		f.count()
		sw.delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_policy", "type": "function",
			"function": map[string]any{"name": "load_knowledge", "arguments": `{"name":"refund-policy"}`}}}})
		sw.finish("tool_calls")
	case strings.Contains(query, "annual plan"):
		f.count()
		sw.delta(map[string]any{"content": "Annual plans are refundable within 30 days of purchase, in full. "})
		sw.delta(map[string]any{"content": "I will file the refund request for you."})
		sw.finish("stop")
	case strings.Contains(query, "Refund last month") && strings.Contains(system, fixMarker):
		f.count()
		sw.delta(map[string]any{"content": "I am sorry: monthly plans are not refundable."})
		sw.finish("stop")
	case strings.Contains(query, "Refund last month"):
		f.count()
		sw.delta(map[string]any{"content": "Sure, last month is refunded."})
		sw.finish("stop")
	default:
		f.count()
		sw.delta(map[string]any{"content": "fake: no script for " + query})
		sw.finish("stop")
	}
}

func (f *fakeEvalModel) count() {
	f.mu.Lock()
	f.chats++
	f.mu.Unlock()
}

// assertionLine is one numbered assertion of the judge's prompt.
var assertionLine = regexp.MustCompile(`(?m)^(\d+)\. (.+)$`)

// verdict grades the assertions of a judge prompt from its answer text, as the judge's JSON.
func (f *fakeEvalModel) verdict(prompt string) string {
	if f.malformed {
		return "Both assertions hold, PASS."
	}
	_, rest, _ := strings.Cut(prompt, "## Answer text\n")
	answer, assertions, _ := strings.Cut(rest, "\n\n## Assertions\n")
	answer = strings.ToLower(answer)
	type verdict struct {
		Index  int    `json:"index"`
		Pass   bool   `json:"pass"`
		Reason string `json:"reason"`
	}
	var out []verdict
	for _, m := range assertionLine.FindAllStringSubmatch(assertions, -1) {
		var v verdict
		_, _ = fmt.Sscan(m[1], &v.Index)
		a := strings.ToLower(m[2])
		switch {
		case strings.Contains(a, "monthly plans are not refundable"):
			v.Pass = strings.Contains(answer, "not refundable")
		case strings.Contains(a, "refund is possible in full"):
			v.Pass = strings.Contains(answer, "in full")
		case strings.Contains(a, "promise an amount"):
			v.Pass = !strings.Contains(answer, "eur")
		default:
			v.Reason = "fake judge: no script for this assertion"
		}
		if v.Reason == "" && v.Pass {
			v.Reason = "fake judge: the answer does so"
		} else if v.Reason == "" {
			v.Reason = "fake judge: the answer does not (" + strings.TrimSpace(answer) + ")"
		}
		out = append(out, v)
	}
	b, _ := json.Marshal(map[string]any{"verdicts": out})
	return string(b)
}

// sseWriter writes OpenAI chat.completion.chunk events.
type sseWriter struct{ w http.ResponseWriter }

func (s *sseWriter) event(v any) {
	b, _ := json.Marshal(v)
	_, _ = fmt.Fprintf(s.w, "data: %s\n\n", b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *sseWriter) delta(d map[string]any) {
	s.event(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": nil}}})
}

// finish ends the stream with reason, a usage chunk and [DONE].
func (s *sseWriter) finish(reason string) {
	s.event(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": reason}}})
	s.event(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}})
	_, _ = io.WriteString(s.w, "data: [DONE]\n\n")
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// evalsAgent is a git-source agent of the support-desk tree on the openai model "m" of a fake.
type evalsAgent struct {
	id, slug string
	repo     *gittest.Repo
	dir      string // the repository's work tree
}

// newEvalsAgent creates an agent slug whose git repository holds the support-desk tree with
// models.main openai/m (fixed: with fixMarker in AGENT.md already), on the branch evalsBranch;
// its secrets point the openai provider at model. Pushes deploy (autoDeploy), production is
// only changed by promotion.
func newEvalsAgent(tb testing.TB, p *benchPlatform, slug string, model *fakeEvalModel, fixed bool) *evalsAgent {
	tb.Helper()
	files := agenttest.Files(tb, "support-desk")
	const echo = `"main": { "provider": "echo", "model": "echo" }`
	if !strings.Contains(files["svc.json"], echo) {
		tb.Fatalf("the support-desk svc.json has no %s:\n%s", echo, files["svc.json"])
	}
	files["svc.json"] = strings.Replace(files["svc.json"], echo, `"main": { "provider": "openai", "model": "m" }`, 1)
	if fixed {
		files["agents/default/AGENT.md"] += "\n" + fixMarker + "\n"
	}
	dir := tb.TempDir()
	repo, _ := gittest.Init(tb, dir, agenttest.Write(tb, files))
	repo.Branch(tb, evalsBranch)
	var a struct{ AgentID, Slug string }
	if s := p.call(tb, "POST", "/api/agents", map[string]any{"name": slug}, nil, &a); s != 201 {
		tb.Fatalf("create agent = %d", s)
	}
	if s := p.call(tb, "PUT", "/api/agents/"+a.AgentID+"/source", map[string]any{"type": "git", "url": "file://" + dir}, nil, nil); s != 200 {
		tb.Fatalf("source = %d", s)
	}
	if s := p.call(tb, "PUT", "/api/agents/"+a.AgentID+"/deploy-settings", map[string]any{"autoDeploy": true}, nil, nil); s != 200 {
		tb.Fatalf("deploy settings = %d", s)
	}
	for name, value := range map[string]string{
		"OPENAI_BASE_URL": model.URL, "OPENAI_API_KEY": "sk-fake",
		"SUPPORT_DB_URL": filepath.Join(tb.TempDir(), "stores.db"), // the fixture's stores
	} {
		if s := p.call(tb, "PUT", "/api/agents/"+a.AgentID+"/secrets/"+name, map[string]string{"value": value}, nil, nil); s != 204 {
			tb.Fatalf("secret %s = %d", name, s)
		}
	}
	return &evalsAgent{id: a.AgentID, slug: a.Slug, repo: repo, dir: dir}
}

// commit commits the work tree (changed by edit when not nil) on evalsBranch and returns the hash.
func (a *evalsAgent) commit(tb testing.TB, msg string, edit func(dir string)) string {
	tb.Helper()
	if edit != nil {
		edit(a.dir)
	}
	return a.repo.Commit(tb, "", msg)
}

// evalRunView is GET /api/deployments/{id}/evals: the run and evals.Result (no JSON tags).
type evalRunView struct {
	EvalRunID string `json:"evalRunId"`
	DeployID  string `json:"deployId"`
	Commit    string `json:"commit"`
	State     string `json:"state"`
	Error     string `json:"error"`
	Result    struct {
		State string
		Evals []struct {
			Name, Title, Status string
			Assertions          []assertionView
			Runs                []struct {
				SessionID, Status, Error string
				Assertions               []assertionView
				ChatTokens, JudgeTokens  int
			}
			Tokens int
		}
	} `json:"result"`
}

type assertionView struct{ Text, By, Status, Reason string }

// waitEvalRun polls the deployment's latest eval run until it has ended.
func waitEvalRun(tb testing.TB, p *benchPlatform, deployID string) evalRunView {
	tb.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		var run evalRunView
		status := p.call(tb, "GET", "/api/deployments/"+deployID+"/evals", nil, nil, &run)
		if status == 200 && run.State != "queued" && run.State != "running" {
			return run
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the evals of %s did not end: %d %+v", deployID, status, run)
		}
	}
}

type commitStatusView struct {
	Commit, Context, State, Description string
	CreatedAt                           time.Time
	Latest                              bool
}

// evalStatuses lists the commit's svc/evals statuses, oldest first.
func evalStatuses(tb testing.TB, p *benchPlatform, agentID, commit string) []commitStatusView {
	tb.Helper()
	var out struct{ Statuses []commitStatusView }
	if s := p.call(tb, "GET", "/api/agents/"+agentID+"/commit-statuses?commit="+commit, nil, nil, &out); s != 200 {
		tb.Fatalf("commit statuses of %s = %d", commit, s)
	}
	var list []commitStatusView
	for _, st := range out.Statuses {
		if st.Context == "svc/evals" {
			list = append(list, st)
		}
	}
	slices.Reverse(list)
	return list
}

// checkStatusSequence checks that the commit's svc/evals statuses are want, oldest first, the
// newest alone marked latest.
func checkStatusSequence(t *testing.T, p *benchPlatform, agentID, commit string, want ...string) {
	t.Helper()
	list := evalStatuses(t, p, agentID, commit)
	var got []string
	for i, st := range list {
		got = append(got, st.State)
		if st.Latest != (i == len(list)-1) || !strings.EqualFold(st.Commit, commit) {
			t.Errorf("commit %s: status %d %+v: latest %v", commit, i, st, st.Latest)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("commit %s: svc/evals statuses %v, want %v", commit, got, want)
	}
}

// promoteEvals promotes the active deployment of evalsEnv to production and returns the status,
// the error code and the new deployment's commit.
func promoteEvals(t *testing.T, p *benchPlatform, agentID string, force bool) (int, string, string) {
	t.Helper()
	var out struct {
		Commit, Environment string
		Error               struct{ Code, Message string }
	}
	status := p.call(t, "POST", "/api/deployments/promote", map[string]any{"agentId": agentID, "fromEnvironment": evalsEnv,
		"toEnvironment": "production", "force": force}, nil, &out)
	if status == 200 && out.Environment != "production" {
		t.Errorf("promoted to %q", out.Environment)
	}
	return status, out.Error.Code, out.Commit
}

// waitFor waits for ch to close, failing the test after a generous deadline.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not happen", what)
	}
}

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
