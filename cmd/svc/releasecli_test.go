package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent/agenttest"
	"svc/client"
)

func TestStatus(t *testing.T) {
	p := startPlatform(t)
	a, repo, commit := newGitAgent(t, p, "hello", "hello")
	ctx := context.Background()
	prod := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID})
	if _, err := admin(p).Activate(ctx, prod.DeployID); err != nil {
		t.Fatal(err)
	}
	staging := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID, Environment: "staging"})
	repo.Commit(t, agenttest.Dir(t, "broken"), "break it")
	failed := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID})
	preview := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID, Environment: "preview-x", Branch: "main"})
	if failed.Status != client.StatusFailed || preview.Status != client.StatusFailed {
		t.Fatalf("builds of the broken commit: %s, %s; want both failed", failed.Status, preview.Status)
	}
	res := runCLI(t, p, "", "status", "--agent", "hello")
	if res.err != nil {
		t.Fatal(res.err)
	}
	// Ages are seconds here; the columns are compared word by word.
	var got [][]string
	for _, line := range strings.Split(regexp.MustCompile(`\b\d+s\b`).ReplaceAllString(res.stdout, "Ns"), "\n") {
		got = append(got, strings.Fields(line))
	}
	short := commit[:7]
	want := [][]string{
		{"Agent", "hello", "(" + a.AgentID + ")"},
		{"URL", a.URL},
		{},
		{"ENVIRONMENT", "ACTIVE", "COMMIT", "STATUS", "AGE", "NEWEST"},
		{"production", prod.DeployID, short, "ready", "Ns", failed.DeployID, "(failed,", "Ns)"},
		{"preview-x", "-", "-", "-", "-", preview.DeployID, "(failed,", "Ns)"},
		{"staging", staging.DeployID, short, "ready", "Ns", "-"},
		{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s\n%s", diff, res.stdout)
	}

	empty := newAgent(t, p, "empty", false)
	res = runCLI(t, p, "", "status", "--agent", empty.AgentID)
	if res.err != nil || !strings.Contains(res.stdout, "No deployments yet") {
		t.Errorf("status of an agent without deployments = %q, %v", res.stdout, res.err)
	}
}

// TestPrintStatus: the table's layout and ages, for deployments of every age and state.
func TestPrintStatus(t *testing.T) {
	a := client.Agent{AgentID: "ag_hello", Slug: "hello", URL: "http://hello.apps.localhost:8080"}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ready := func(id, env, commit string, ago time.Duration) client.Deployment {
		at := now.Add(-ago)
		return client.Deployment{DeployID: id, BuildID: "b" + id, AgentID: a.AgentID, Environment: env, Commit: commit,
			Status: client.StatusReady, IsActive: true, CreatedAt: at, ReadyAt: &at, ActivatedAt: &at}
	}
	deps := []client.Deployment{ // newest first
		{DeployID: "d4", AgentID: a.AgentID, Environment: "preview-x", Status: client.StatusBuilding, CreatedAt: now.Add(-72 * time.Hour)},
		{DeployID: "d3", AgentID: a.AgentID, Environment: "production", Status: client.StatusFailed, CreatedAt: now.Add(-5 * time.Minute)},
		ready("d2", "staging", "", 45*time.Second),
		ready("d1", "production", "0123456789abcdef0123456789abcdef01234567", 150*time.Minute),
	}
	var out bytes.Buffer
	if err := printStatus(&out, a, deps, now); err != nil {
		t.Fatal(err)
	}
	want := "Agent hello (ag_hello)\n" +
		"URL   " + a.URL + "\n" +
		"\n" +
		"ENVIRONMENT  ACTIVE  COMMIT   STATUS  AGE  NEWEST\n" +
		"production   d1      0123456  ready   2h   d3 (failed, 5m)\n" +
		"preview-x    -       -        -       -    d4 (building, 3d)\n" +
		"staging      d2      -        ready   45s  -\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// wantErr fails unless err's text is prefix, the platform's own words, then suffix.
func wantErr(t *testing.T, what string, err error, prefix, suffix string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.HasSuffix(err.Error(), suffix) || len(err.Error()) == len(prefix+suffix) {
		t.Errorf("%s = %v, want %q + the platform's reason + %q", what, err, prefix, suffix)
	}
}

func TestActivatePromoteRollback(t *testing.T) {
	dataDir := t.TempDir()
	p := startPlatformAt(t, dataDir) // the last refusal damages a bundle in the data dir
	a, repo, commit := newGitAgent(t, p, "hello", "hello")
	ctx := context.Background()
	first := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID}) // production: ready, not active
	res := runCLI(t, p, "", "activate", first.DeployID)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantLines(t, "activate", res.stdout, "Deployment "+first.DeployID+" is now active in production\n", "  build        "+first.BuildID,
		"  from         "+commit[:7]+" (main)", "  status       ready, active")

	redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID, Environment: "staging"}) // active in staging
	res = runCLI(t, p, "", "promote", "--agent", "hello", "--from", "staging")
	if res.err != nil {
		t.Fatal(res.err)
	}
	// A promotion builds nothing: it names the deployment it copied, not a build without a log.
	wantLines(t, "promote", res.stdout, "Promoted staging to production: deployment d", " is now active", "environment  production", "copied from  deployment d")
	if strings.Contains(res.stdout, "  build ") {
		t.Errorf("promote names a build:\n%s", res.stdout)
	}
	active, err := admin(p).ActiveDeployment(ctx, a.AgentID, "")
	if err != nil || active.DeployID == first.DeployID {
		t.Fatalf("active after promote = %+v, %v", active, err)
	}

	res = runCLI(t, p, "", "rollback", "--agent", "hello")
	if res.err != nil || !strings.Contains(res.stdout, "Rolled back production: deployment "+first.DeployID+" is now active") {
		t.Fatalf("rollback = %q, %v", res.stdout, res.err)
	}
	res = runCLI(t, p, "", "rollback", "--agent", "hello", active.DeployID)
	if res.err != nil || !strings.Contains(res.stdout, "deployment "+active.DeployID+" is now active") {
		t.Fatalf("rollback to an id = %q, %v", res.stdout, res.err)
	}

	// The platform's refusals, each explained.
	if s := p.call(t, "POST", "/api/agents/"+a.AgentID+"/commit-statuses", map[string]any{"commit": commit, "context": "svc/evals", "state": "failure"}, nil, nil); s != 201 && s != 200 {
		t.Fatalf("post a failing evals status = %d", s)
	}
	res = runCLI(t, p, "", "promote", "--agent", "hello", "--from", "staging")
	wantErr(t, "promote with failing evals", res.err, "promotion blocked: the svc/evals status of the source commit is pending or failing (", "); fix the evals or pass --force")
	if res := runCLI(t, p, "", "promote", "--agent", "hello", "--from", "staging", "--force"); res.err != nil {
		t.Errorf("promote --force with failing evals = %v", res.err)
	}
	res = runCLI(t, p, "", "promote", "--agent", "hello", "--from", "qa")
	if want := "refused: environment qa has no active deployment to promote"; res.err == nil || res.err.Error() != want {
		t.Errorf("promote from an environment with nothing active = %v, want %q", res.err, want)
	}
	res = runCLI(t, p, "", "rollback", "--agent", "hello", "--env", "staging")
	// Said once (not the platform's message again), with what makes a rollback possible.
	if res.err == nil || strings.Count(res.err.Error(), "no earlier deployment") != 1 || !strings.Contains(res.err.Error(), "once a newer deployment is active") {
		t.Errorf("rollback of an environment that had one deployment = %v", res.err)
	}
	if res := runCLI(t, p, "", "rollback", "--agent", "hello", "--env", "nowhere"); res.err == nil || !strings.Contains(res.err.Error(), "nothing to roll back") {
		t.Errorf("rollback of an empty environment = %v", res.err)
	}
	repo.Commit(t, agenttest.Dir(t, "broken"), "break it")
	failed := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID})
	res = runCLI(t, p, "", "activate", failed.DeployID)
	wantErr(t, "activate a failed deployment", res.err, "the deployment is not ready: its build has not succeeded (", "); follow it with `svc logs BUILD_ID -f`")
	var observer struct{ Token string }
	if s := p.call(t, "POST", "/api/tokens", map[string]any{"name": "watcher", "kind": "observer"}, nil, &observer); s != 201 {
		t.Fatalf("create an observer token = %d", s)
	}
	res = runCLI(t, nil, "", "activate", first.DeployID, "--url", p.url, "--token", observer.Token)
	wantErr(t, "activate with an observer token", res.err, "the token may not do this (", "): use an operator token bound to this agent, or an unbound one")
	if res := runCLI(t, p, "", "promote", "--agent", "hello"); res.err == nil || !strings.Contains(res.err.Error(), "--from") {
		t.Errorf("promote without --from = %v", res.err)
	}
	res = runCLI(t, nil, "", "promote", "--agent", "hello", "--from", "staging", "--force", "--url", p.url, "--token", "pk_bad")
	wantErr(t, "promote with a bad token", res.err, "the platform refused the token (", "): check SVC_TOKEN or --token")

	// A deployment whose bundle is gone from the object store is refused before anything changes.
	bundles, err := filepath.Glob(filepath.Join(dataDir, "objects", "bundles", a.Slug, "*"))
	if err != nil || len(bundles) == 0 {
		t.Fatalf("bundles = %v, %v", bundles, err)
	}
	for _, b := range bundles {
		if err := os.Remove(b); err != nil {
			t.Fatal(err)
		}
	}
	res = runCLI(t, p, "", "rollback", "--agent", "hello", active.DeployID)
	if want := "refused: the bundle of deployment " + active.DeployID + " is missing or does not open; nothing was changed"; res.err == nil || res.err.Error() != want {
		t.Errorf("rollback to a deployment without its bundle = %v, want %q", res.err, want)
	}
}

func TestToken(t *testing.T) {
	p := startPlatform(t)
	newAgent(t, p, "hello", false)
	tests := []struct {
		ttl string
		ok  bool
	}{
		{"59s", false}, {"1m", true}, {"24h", true}, {"24h0m1s", false}, {"90.5s", false},
	}
	for _, tt := range tests {
		res := runCLI(t, p, "", "token", "--agent", "hello", "--ttl", tt.ttl, "--scope-id", "org-1")
		if tt.ok != (res.err == nil) {
			t.Errorf("--ttl %s: error %v, want ok=%v", tt.ttl, res.err, tt.ok)
		}
		if !tt.ok {
			if res.err == nil || !strings.Contains(res.err.Error(), "--ttl") {
				t.Errorf("--ttl %s: error %v, want one naming --ttl", tt.ttl, res.err)
			}
			continue
		}
		if !jwt.MatchString(res.stdout) {
			t.Errorf("--ttl %s printed %q, want only the token", tt.ttl, res.stdout)
			continue
		}
		// The token carries what was asked for.
		payload, err := base64.RawURLEncoding.DecodeString(strings.Split(res.stdout, ".")[1])
		var claims struct {
			ScopeID  string `json:"scope_id"`
			Exp, Iat int64
		}
		if err == nil {
			err = json.Unmarshal(payload, &claims)
		}
		ttl, _ := time.ParseDuration(tt.ttl)
		if err != nil || claims.ScopeID != "org-1" || claims.Exp-claims.Iat != int64(ttl/time.Second) {
			t.Errorf("--ttl %s: claims %+v, %v; want scope_id org-1 and a lifetime of %s", tt.ttl, claims, err, tt.ttl)
		}
	}
}
