package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/agent/agenttest"
)

// TestRoutingFollowsLifecycle checks, through svc up's real listener and real runtimes, which
// deployment's /health answers at the persistent and pinned URLs before and after each change.
func TestRoutingFollowsLifecycle(t *testing.T) {
	p := startPlatform(t)
	var a struct{ AgentID, Slug string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": "router"}, nil, &a)
	files := agenttest.Files(t, "hello")
	deploy := func(env, note string) string {
		files["NOTES.md"] = note
		var sv struct{ SourceVersionID string }
		if s := p.call(t, "POST", "/api/agents/"+a.AgentID+"/source-versions", map[string]any{"files": files}, nil, &sv); s != 201 {
			t.Fatalf("upload = %d", s)
		}
		var rd struct{ DeployID string }
		p.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": a.AgentID, "environment": env, "sourceVersionId": sv.SourceVersionID}, nil, &rd)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			var d struct{ Status string }
			p.call(t, "GET", "/api/deployments/"+rd.DeployID, nil, nil, &d)
			if d.Status == "ready" {
				return rd.DeployID
			}
		}
		t.Fatalf("deployment %s never ready", rd.DeployID)
		return ""
	}
	var tok struct{ Token string }
	p.call(t, "POST", "/api/agents/"+a.AgentID+"/tokens", map[string]any{}, nil, &tok)
	health := func(label string) (int, string) { return agentHealth(t, p, label, tok.Token) }
	expect := func(label string, status int, want string) {
		t.Helper()
		if s, got := health(label); s != status || got != want {
			t.Errorf("%s /health = %d %s, want %d %s", label, s, got, status, want)
		}
	}
	persistent := a.Slug
	pinned := func(id string) string { return id + "--" + a.Slug }

	expect(persistent, 503, "NO_ACTIVE_DEPLOYMENT")
	expect("nobody", 404, "NOT_FOUND")
	d1 := deploy("production", "one")
	expect(persistent, 503, "NO_ACTIVE_DEPLOYMENT") // ready but not active
	expect(pinned(d1), 200, d1)
	p.call(t, "POST", "/api/deployments/"+d1+"/activate", nil, nil, nil)
	expect(persistent, 200, d1)
	d2 := deploy("production", "two")
	p.call(t, "POST", "/api/deployments/"+d2+"/activate", nil, nil, nil)
	expect(persistent, 200, d2)
	expect(pinned(d1), 200, d1)
	p.call(t, "POST", "/api/deployments/rollback", map[string]any{"agentId": a.AgentID}, nil, nil)
	expect(persistent, 200, d1)
	staging := deploy("staging", "three")
	expect(persistent, 200, d1) // another environment never serves the persistent URL
	var promoted struct{ DeployID string }
	p.call(t, "POST", "/api/deployments/promote", map[string]any{"agentId": a.AgentID, "fromEnvironment": "staging"}, nil, &promoted)
	expect(persistent, 200, promoted.DeployID)
	expect(pinned(staging), 200, staging)
	p.call(t, "POST", "/api/deployments/"+promoted.DeployID+"/runtime/stop", nil, nil, nil)
	expect(persistent, 503, "RUNTIME_STOPPED")
	expect(pinned(promoted.DeployID), 503, "RUNTIME_STOPPED")
	p.call(t, "POST", "/api/deployments/"+promoted.DeployID+"/runtime/start", nil, nil, nil)
	expect(persistent, 200, promoted.DeployID)
	expect("dnosuchdeploy--"+a.Slug, 404, "NOT_FOUND")
}

// TestDeepTreeServesAndUnloadableBundleSaysSo: a tree twelve folders deep builds and serves; an
// active deployment whose bundle a runner cannot load answers 503 RUNTIME_UNAVAILABLE, and the
// deployment record and `svc status` say why instead of "running".
func TestDeepTreeServesAndUnloadableBundleSaysSo(t *testing.T) {
	dataDir := t.TempDir()
	p := startPlatformAt(t, dataDir)
	var a struct{ AgentID, Slug string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": "deep"}, nil, &a)
	var tok struct{ Token string }
	p.call(t, "POST", "/api/agents/"+a.AgentID+"/tokens", map[string]any{}, nil, &tok)
	files := agenttest.Files(t, "hello")
	deploy := func(note string) string {
		files["docs/a/b/c/d/e/f/g/h/i/j/k/notes.md"] = note
		var sv struct{ SourceVersionID string }
		if s := p.call(t, "POST", "/api/agents/"+a.AgentID+"/source-versions", map[string]any{"files": files}, nil, &sv); s != 201 {
			t.Fatalf("upload = %d", s)
		}
		var rd struct{ DeployID string }
		p.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": a.AgentID, "sourceVersionId": sv.SourceVersionID}, nil, &rd)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			var d struct{ Status, Error string }
			p.call(t, "GET", "/api/deployments/"+rd.DeployID, nil, nil, &d)
			if d.Status == "ready" {
				if s := p.call(t, "POST", "/api/deployments/"+rd.DeployID+"/activate", nil, nil, nil); s != 200 {
					t.Fatalf("activate = %d", s)
				}
				return rd.DeployID
			}
			if d.Status == "failed" {
				t.Fatalf("build failed: %s", d.Error)
			}
		}
		t.Fatalf("deployment %s never ready", rd.DeployID)
		return ""
	}
	health := func() (int, string) { return agentHealth(t, p, a.Slug, tok.Token) }
	first := deploy("twelve folders deep")
	if s, got := health(); s != 200 || got != first {
		t.Fatalf("the deep tree's agent /health = %d %s, want 200 %s", s, got, first)
	}

	// A second deployment is activated, then its bundle is damaged before any runner loaded it.
	second := deploy("again")
	bundles, err := filepath.Glob(filepath.Join(dataDir, "objects", "bundles", a.Slug, "*"))
	if err != nil || len(bundles) != 2 {
		t.Fatalf("bundles = %v, %v", bundles, err)
	}
	for _, b := range bundles {
		if err := os.WriteFile(b, []byte("damaged"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if s, got := health(); s != 503 || got != "RUNTIME_UNAVAILABLE" {
		t.Fatalf("/health with a damaged bundle = %d %s, want 503 RUNTIME_UNAVAILABLE", s, got)
	}
	var d struct{ Runtime, RuntimeError string }
	p.call(t, "GET", "/api/deployments/"+second, nil, nil, &d)
	if d.Runtime != "unavailable" || !strings.Contains(d.RuntimeError, "invalid bundle") {
		t.Fatalf("deployment record runtime = %q (%q), want unavailable with the reason", d.Runtime, d.RuntimeError)
	}
	out, err := execute(context.Background(), "status", "--url", p.url, "--token", p.token, "--agent", a.Slug)
	if err != nil || !strings.Contains(out, "production: "+second+" is active but its runtime is unavailable: ") {
		t.Fatalf("svc status = %v\n%s", err, out)
	}
}

// agentHealth gets /health of the agent host <label>.apps.localhost and returns the status with
// the deployment that answered, or the error code.
func agentHealth(t *testing.T, p *benchPlatform, label, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", p.url+"/health", nil)
	req.Host = label + ".apps.localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		DeployID string
		Error    struct{ Code string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if body.DeployID != "" {
		return resp.StatusCode, body.DeployID
	}
	return resp.StatusCode, body.Error.Code
}
