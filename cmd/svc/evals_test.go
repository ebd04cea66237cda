package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/client"
)

// TestEvalsAfterBuild: a git commit's build queues its evals; they run on the deployment (the
// fixture's agent answers on the echo model, which also judges, so the judged assertions are
// errors and the rule-judged ones decide); the run's result is readable, the commit's svc/evals
// status ends with the run's state, and the build log says the evals were queued. POST runs them
// again on demand.
func TestEvalsAfterBuild(t *testing.T) {
	t.Setenv("SUPPORT_DB_URL", filepath.Join(t.TempDir(), "stores.db"))
	t.Setenv("SVC_PUBLIC_URL", "https://svc.example.com/")
	p := startPlatform(t)
	a, _, _ := newGitAgent(t, p, "evald", "support-desk")
	d := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID, Environment: "production"})
	if d.Status != "ready" {
		t.Fatalf("deployment %+v", d)
	}
	var run struct {
		EvalRunID string
		State     string
		Commit    string
		Result    struct {
			State string
			Evals []struct {
				Name   string
				Status string
				Runs   []struct{ SessionID string }
			}
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		status := p.call(t, "GET", "/api/deployments/"+d.DeployID+"/evals", nil, nil, &run)
		if status == 200 && run.State != "queued" && run.State != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the evals did not finish: %d %+v", status, run)
		}
	}
	if run.State != run.Result.State || len(run.Result.Evals) != 2 || run.Commit == "" {
		t.Fatalf("eval run %+v", run)
	}
	for _, e := range run.Result.Evals {
		if len(e.Runs) != 1 || e.Runs[0].SessionID == "" {
			t.Errorf("eval %s: runs %+v", e.Name, e.Runs)
		}
	}
	var logs strings.Builder
	if err := admin(p).Logs(context.Background(), d.BuildID, &logs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "2 evals queued") {
		t.Errorf("the build log does not say the evals were queued:\n%s", logs.String())
	}
	// The run's failure is the commit's svc/evals status: promoting that commit is refused.
	if status := p.call(t, "POST", "/api/deployments/"+d.DeployID+"/activate", nil, nil, nil); status != 200 {
		t.Fatalf("activate: %d", status)
	}
	var refused struct{ Error struct{ Code string } }
	if status := p.call(t, "POST", "/api/deployments/promote", map[string]any{"agentId": a.AgentID, "fromEnvironment": "production", "toEnvironment": "staging"}, nil, &refused); status != 422 || refused.Error.Code != "EVAL_GATE_BLOCKED" {
		t.Errorf("promote after failing evals: %d %+v", status, refused)
	}
	// The commit's statuses: pending when queued, then the run's state, the newest marked latest.
	var statuses struct {
		Statuses []struct {
			Context, State string
			Latest         bool
		}
	}
	if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/commit-statuses?commit="+run.Commit, nil, nil, &statuses); status != 200 ||
		len(statuses.Statuses) < 2 || statuses.Statuses[0].State != "failure" || !statuses.Statuses[0].Latest ||
		statuses.Statuses[len(statuses.Statuses)-1].State != "pending" || statuses.Statuses[len(statuses.Statuses)-1].Latest {
		t.Errorf("commit statuses: %d %+v", status, statuses.Statuses)
	}
	if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/commit-statuses?commit=nope", nil, nil, nil); status != 400 {
		t.Errorf("a bad commit: %d", status)
	}
	// svc evals show prints the run as a table.
	res := runCLI(t, p, "", "evals", "show", d.DeployID)
	if res.err != nil {
		t.Fatalf("svc evals show: %v\n%s", res.err, res.stderr)
	}
	wantLines(t, "svc evals show", res.stdout, "Eval run "+run.EvalRunID+" of deployment "+d.DeployID+": failure",
		"EVAL", "JUDGED BY", "no-monthly-refund", "refund-annual")
	// On demand: a second run.
	// svc evals run runs them again, waits and fails with the run.
	res = runCLI(t, p, "", "evals", "run", d.DeployID)
	if !isExit(res.err) || !strings.Contains(res.stderr, "queued") || !strings.Contains(res.stdout, ": failure") || strings.Contains(res.stdout, run.EvalRunID) {
		t.Errorf("svc evals run: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	// With a host token, the statuses go to the git host too: pending, then the run's state.
	var mu sync.Mutex
	var posted []string
	gitea := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		posted = append(posted, r.URL.Path+" "+r.Header.Get("Authorization")+" "+body["state"]+" "+body["context"]+" "+body["target_url"])
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer gitea.Close()
	if status := p.call(t, "PUT", "/api/agents/"+a.AgentID+"/secrets/GITEA_TOKEN", map[string]string{"value": "gitea-tok"}, nil, nil); status != 204 {
		t.Fatalf("secret: %d", status)
	}
	if status := p.call(t, "PUT", "/api/agents/"+a.AgentID+"/source", map[string]any{"type": "git", "url": gitea.URL + "/acme/desk.git"}, nil, nil); status != 200 {
		t.Fatalf("source: %d", status)
	}
	if res := runCLI(t, p, "", "evals", "run", d.DeployID); !isExit(res.err) {
		t.Fatalf("svc evals run: %v", res.err)
	}
	// The run's state is stored before its status goes to the host (a slow host does not hold
	// the run up), so the CLI may return before the second post arrives.
	var got string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(posted)
		got = strings.Join(posted, "\n")
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
	}
	link := " https://svc.example.com/api/deployments/" + d.DeployID + "/evals"
	want := "/api/v1/repos/acme/desk/statuses/" + run.Commit + " token gitea-tok pending svc/evals" + link + "\n" +
		"/api/v1/repos/acme/desk/statuses/" + run.Commit + " token gitea-tok failure svc/evals" + link
	if got != want {
		t.Errorf("the git host got:\n%s\nwant:\n%s", got, want)
	}
	b, _ := json.Marshal(run)
	t.Logf("eval run: %s", b)
}
