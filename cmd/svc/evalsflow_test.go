package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
