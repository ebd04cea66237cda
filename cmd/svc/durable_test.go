package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"svc/migrations"
	"svc/runner/durable"
)

// The durable tool runs of the platform survive what kills processes (issue 11): a kill -9 while
// a run is parked and while one of its steps runs, each followed by a fresh process on the same
// data; a sleep woken through the queue on SQLite and on Redis; and an answer that resumes a run
// on the deployment that started it after a newer one took the agent's URL.
//
// Every test deploys the agent of testdata/durable/flow, whose durable tool "flow" journals a
// random first step, then parks for an approval, runs a 3 second step, or sleeps 2 seconds,
// according to its mode.

// childHandlerTimeout is SVC_HANDLER_TIMEOUT of the svc up children: more than the 3 second step.
const childHandlerTimeout = 5 * time.Second

// svcEnv are the settings of the environment that would move svc up off its data dir.
var svcEnv = []string{"SVC_TOKEN", "SVC_AGENT", "DATABASE_URL", "REDIS_URL", "SVC_S3_ENDPOINT", "SVC_BOOTSTRAP_ADMIN_TOKEN", "SVC_DATA_DIR", "SVC_ADDR", "SVC_HANDLER_TIMEOUT"}

// clearSVCEnv unsets svcEnv for the test (svc up in this process reads the environment).
func clearSVCEnv(t *testing.T) {
	for _, name := range svcEnv {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

// child is svc up running as a child process (TestMain, envChildArgs), which a test may kill.
type child struct {
	*benchPlatform
	cmd  *exec.Cmd
	done chan struct{} // closed once the process was waited for
	log  string
}

// startChild runs svc up in a child process on dataDir, with SVC_HANDLER_TIMEOUT at
// childHandlerTimeout, and returns it once it serves. It is killed and waited for at the end of
// the test.
func startChild(t *testing.T, dataDir string) *child {
	t.Helper()
	addr := freeAddr(t)
	args, _ := json.Marshal([]string{"up", "--data-dir", dataDir, "--addr", addr, "--log-level", "warn", "--log-format", "json",
		"--handler-timeout", childHandlerTimeout.String()})
	logFile, err := os.CreateTemp(t.TempDir(), "svc-up-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SVC_TEST_CHILD") && !contains(svcEnv, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envChildArgs+"="+string(args))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	c := &child{benchPlatform: &benchPlatform{url: "http://" + addr}, cmd: cmd, done: make(chan struct{}), log: logFile.Name()}
	c.cancel = c.kill
	go func() {
		_ = cmd.Wait() // a killed child's error is expected
		logFile.Close()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			b, _ := os.ReadFile(c.log)
			t.Logf("log of svc up (pid %d):\n%s", cmd.Process.Pid, b)
		}
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-c.done:
			b, _ := os.ReadFile(c.log)
			t.Fatalf("svc up exited before serving:\n%s", b)
		default:
		}
		if resp, err := http.Get(c.url + "/health"); err == nil {
			resp.Body.Close()
			if b, err := os.ReadFile(filepath.Join(dataDir, "admin-token")); err == nil && len(bytes.TrimSpace(b)) > 0 {
				c.token = strings.TrimSpace(string(b))
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("svc up did not start")
		}
	}
}

// kill ends the child with SIGKILL (kill -9) and waits for it; killing it again does nothing.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL) // fails only when it already ended
	<-c.done
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// flowFiles are the files of testdata/durable/flow, with the handler's VERSION set to version.
func flowFiles(t *testing.T, version string) map[string]string {
	t.Helper()
	root := filepath.Join("testdata", "durable", "flow")
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const handler = "svc/tools/flow/handler.ts"
	if !strings.Contains(files[handler], `const VERSION = "A";`) {
		t.Fatalf("%s does not set VERSION", handler)
	}
	files[handler] = strings.Replace(files[handler], `const VERSION = "A";`, `const VERSION = "`+version+`";`, 1)
	return files
}

// flowAgent is an agent of the platform and a runtime token of user "ana" for it.
type flowAgent struct {
	AgentID, Slug string
	token         string
}

// newFlowAgent creates an agent.
func newFlowAgent(t *testing.T, p *benchPlatform, name string) *flowAgent {
	t.Helper()
	a := &flowAgent{}
	if s := p.call(t, "POST", "/api/agents", map[string]any{"name": name}, nil, a); s != 201 || a.AgentID == "" {
		t.Fatalf("create agent = %d %+v", s, a)
	}
	a.token = mintToken(t, p, a.AgentID)
	return a
}

// mintToken mints a runtime token of user "ana" for agentID.
func mintToken(t *testing.T, p *benchPlatform, agentID string) string {
	t.Helper()
	var tok struct{ Token string }
	if s := p.call(t, "POST", "/api/agents/"+agentID+"/tokens", map[string]any{"user_id": "ana", "ttl": 3600}, nil, &tok); s != 201 {
		t.Fatalf("mint token = %d", s)
	}
	return tok.Token
}

// deployFlow uploads files as the agent's newest source version, builds it, activates it and
// returns the deployment's id.
func deployFlow(t *testing.T, p *benchPlatform, agentID string, files map[string]string) string {
	t.Helper()
	if s := p.call(t, "POST", "/api/agents/"+agentID+"/source-versions", map[string]any{"files": files}, nil, nil); s/100 != 2 {
		t.Fatalf("upload source = %d", s)
	}
	var rd struct{ DeployID string }
	if s := p.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": agentID}, nil, &rd); s/100 != 2 || rd.DeployID == "" {
		t.Fatalf("redeploy = %d %+v", s, rd)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var d struct{ Status, Error string }
		p.call(t, "GET", "/api/deployments/"+rd.DeployID, nil, nil, &d)
		if d.Status == "ready" {
			break
		}
		if d.Status == "failed" {
			t.Fatalf("deployment %s failed: %s", rd.DeployID, d.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment %s: %s", rd.DeployID, d.Status)
		}
	}
	if s := p.call(t, "POST", "/api/deployments/"+rd.DeployID+"/activate", nil, nil, nil); s/100 != 2 {
		t.Fatalf("activate %s = %d", rd.DeployID, s)
	}
	return rd.DeployID
}

// agentDo calls path on the agent's URL (<slug>.apps.localhost) at base with its runtime token.
func agentDo(ctx context.Context, base string, a *flowAgent, method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Host = a.Slug + ".apps.localhost"
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("answer %d %q: %w", resp.StatusCode, b, err)
	}
	return resp.StatusCode, out, nil
}

// agentCall is agentDo that fails the test on a transport error.
func agentCall(t *testing.T, base string, a *flowAgent, method, path string, body any) (int, map[string]any) {
	t.Helper()
	s, out, err := agentDo(t.Context(), base, a, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return s, out
}

// flowMessage is the chat message that makes the echo model call the flow tool in mode.
func flowMessage(mode string) string { return `/tool flow {"mode":"` + mode + `"}` }

// chatFlow chats through the agent's URL at base so that the model calls the flow tool in mode,
// and returns the tool's result.
func chatFlow(t *testing.T, base string, a *flowAgent, mode string) map[string]any {
	t.Helper()
	status, out := agentCall(t, base, a, "POST", "/chat/sync", map[string]any{"message": flowMessage(mode)})
	calls, _ := out["tool_calls"].([]any)
	if status != 200 || len(calls) != 1 {
		t.Fatalf("chat = %d %v; want one tool call", status, out)
	}
	call, _ := calls[0].(map[string]any)
	res, ok := call["result"].(map[string]any)
	if !ok {
		if err := json.Unmarshal([]byte(fmt.Sprint(call["content"])), &res); err != nil {
			t.Fatalf("tool call %v: no JSON result", call)
		}
	}
	if call["status"] != "success" {
		t.Fatalf("tool call %v", call)
	}
	return res
}

// openRuns reads the durable runs of the database at url (sqlite:PATH or postgres://).
func openRuns(t *testing.T, url string) *durable.DB {
	t.Helper()
	db, err := migrations.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return durable.NewDB(db)
}

// waitRun polls run id until its status is want; it fails at once when the run ended otherwise.
// within is a generous deadline, never a timed assertion.
func waitRun(t *testing.T, runs durable.Store, agentID, id, want string, within time.Duration) durable.Run {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		run, err := runs.Get(t.Context(), agentID, id)
		if err == nil && run.Status == want {
			return run
		}
		if err == nil && durable.Ended(run.Status) {
			t.Fatalf("run %s ended %s (error %q, result %s), want %s", id, run.Status, run.Error, run.Result, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %q (%v) after %s, want %s", id, run.Status, err, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRecord polls GET /api/sessions/{id} until the run's status is want (an answer returns as
// soon as it is recorded, the run resuming in the background) and returns that record; it fails
// at once when the run ended otherwise.
func waitRecord(t *testing.T, base string, a *flowAgent, id, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, rec := agentCall(t, base, a, "GET", "/api/sessions/"+id, nil)
		status, _ := rec["status"].(string)
		switch {
		case s == 200 && status == want:
			return rec
		case s == 200 && durable.Ended(status):
			t.Fatalf("run %s ended %s: %v; want %s", id, status, rec, want)
		case time.Now().After(deadline):
			t.Fatalf("GET %s = %d %v; want status %s", id, s, rec, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// journalCount counts the entries of run id by key.
func journalCount(t *testing.T, runs durable.Store, id string) (map[string]int, map[string]json.RawMessage) {
	t.Helper()
	entries, err := runs.Journal(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	n, values := map[string]int{}, map[string]json.RawMessage{}
	for _, e := range entries {
		n[e.Key]++
		values[e.Key] = e.Value
	}
	return n, values
}

// number reads a recorded JSON number.
func number(t *testing.T, raw json.RawMessage) float64 {
	t.Helper()
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("journaled value %s: %v", raw, err)
	}
	return f
}

// resultOf decodes a run's JSON result.
func resultOf(t *testing.T, run durable.Run) map[string]any {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(run.Result, &r); err != nil {
		t.Fatalf("result of %s: %s: %v", run.ID, run.Result, err)
	}
	return r
}

// TestDurableSurvivesKill9WhileParked: a run parked for an approval outlives a kill -9 of its
// process (it is a row in svc.db, nothing else); a fresh process on the same data dir takes the
// answer and completes the run from its journal (the first step's value is the one recorded
// before the kill).
func TestDurableSurvivesKill9WhileParked(t *testing.T) {
	dataDir := t.TempDir()
	c1 := startChild(t, dataDir)
	a := newFlowAgent(t, c1.benchPlatform, "parked")
	deployFlow(t, c1.benchPlatform, a.AgentID, flowFiles(t, "A"))
	res := chatFlow(t, c1.url, a, "park")
	id, _ := res["session_id"].(string)
	if !strings.HasPrefix(id, "dur_") || res["status"] != durable.AwaitingInput {
		t.Fatalf("tool result %v: want an awaiting-input durable session", res)
	}
	runs := openRuns(t, "sqlite:"+filepath.Join(dataDir, "svc.db"))
	if run, err := runs.Get(t.Context(), a.AgentID, id); err != nil || run.Status != durable.AwaitingInput || run.Pause == nil || run.Pause.Kind != durable.PauseApproval {
		t.Fatalf("run before the kill = %+v, %v", run, err)
	}
	n, values := journalCount(t, runs, id)
	if n["step:first#1"] != 1 {
		t.Fatalf("journal before the kill: %v", n)
	}
	first := number(t, values["step:first#1"])

	c1.kill()
	c2 := startChild(t, dataDir)
	if c2.token != c1.token {
		t.Fatalf("the admin token changed across the restart")
	}
	a.token = mintToken(t, c2.benchPlatform, a.AgentID)
	s, rec := agentCall(t, c2.url, a, "POST", "/api/sessions/"+id+"/answer", map[string]any{"value": true})
	if s != 200 || rec["status"] != durable.Running || rec["answered_by"] != "ana" {
		t.Fatalf("answer on the fresh process = %d %v", s, rec)
	}
	rec = waitRecord(t, c2.url, a, id, durable.Completed)
	result, _ := rec["result"].(map[string]any)
	if result["approved"] != true || rec["answered_by"] != "ana" {
		t.Fatalf("the answered run on the fresh process = %v", rec)
	}
	if result["a"] != first {
		t.Errorf("result.a = %v, want %v journaled before the kill: the first step ran again", result["a"], first)
	}
	n, _ = journalCount(t, runs, id)
	if n["step:first#1"] != 1 || n["approval#1"]+n["input#1"] != 1 {
		t.Errorf("journal after the answer: %v", n)
	}
}

// TestDurableSurvivesKill9InAStep: a kill -9 while the run's second step runs leaves the run
// running; on a fresh process, with no request, the lease's wake-up (SVC_HANDLER_TIMEOUT + 5 s
// after the execution began) resumes it from its journal: the first step is not run again, the
// interrupted one runs once more, and the run completes.
func TestDurableSurvivesKill9InAStep(t *testing.T) {
	dataDir := t.TempDir()
	c1 := startChild(t, dataDir)
	a := newFlowAgent(t, c1.benchPlatform, "stepper")
	deployFlow(t, c1.benchPlatform, a.AgentID, flowFiles(t, "A"))
	runs := openRuns(t, "sqlite:"+filepath.Join(dataDir, "svc.db"))

	// The chat waits for the 3 second step: it runs beside the test and ends with the child.
	chatDone := make(chan error, 1)
	go func() {
		_, out, err := agentDo(context.Background(), c1.url, a, "POST", "/chat/sync", map[string]any{"message": flowMessage("slow")})
		if err == nil {
			err = fmt.Errorf("the chat answered %v", out)
		}
		chatDone <- err
	}()
	var chatErr error
	var chatOnce sync.Once
	waitChat := func() { chatOnce.Do(func() { chatErr = <-chatDone }) }
	t.Cleanup(func() { c1.kill(); waitChat() })

	// Wait for the run to be in its slow step: the first step journaled, the run running.
	var id string
	var first float64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		list, err := runs.List(t.Context(), durable.Filter{AgentID: a.AgentID})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && list[0].Status == durable.Running {
			n, values := journalCount(t, runs, list[0].ID)
			if n["step:first#1"] == 1 && n["step:slow#1"] == 0 {
				id, first = list[0].ID, number(t, values["step:first#1"])
				break
			}
		}
		if len(list) > 1 || len(list) == 1 && list[0].Status != durable.Running {
			t.Fatalf("runs %+v: want one running", list)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never reached its slow step: %+v", list)
		}
	}
	c1.kill()
	killed := time.Now()
	waitChat()
	t.Logf("the chat ended with the process: %v", chatErr)
	run, err := runs.Get(t.Context(), a.AgentID, id)
	if err != nil || run.Status != durable.Running || run.Attempt != 1 {
		t.Fatalf("run after the kill = %+v, %v", run, err)
	}
	if n, _ := journalCount(t, runs, id); n["step:slow#1"] != 0 {
		t.Fatalf("the slow step finished before the kill: %v", n)
	}

	startChild(t, dataDir)
	run = waitRun(t, runs, a.AgentID, id, durable.Completed, time.Minute)
	t.Logf("resumed and completed %s after the kill (lease %s)", time.Since(killed).Round(100*time.Millisecond), childHandlerTimeout+5*time.Second)
	result := resultOf(t, run)
	if result["b"] != "slow done" || result["a"] != first {
		t.Errorf("result %s; want b \"slow done\" and a %v, journaled before the kill", run.Result, first)
	}
	if run.Attempt < 2 {
		t.Errorf("attempt %d: want the run claimed again", run.Attempt)
	}
	if n, _ := journalCount(t, runs, id); n["step:first#1"] != 1 || n["step:slow#1"] != 1 {
		t.Errorf("journal %v: want step:first#1 and step:slow#1 once each", n)
	}
}
