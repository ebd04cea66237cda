package main

import (
	"encoding/json"
	"net/http"
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
	health := func(label string) (int, string) {
		req, _ := http.NewRequest("GET", p.url+"/health", nil)
		req.Host = label + ".apps.localhost"
		req.Header.Set("Authorization", "Bearer "+tok.Token)
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
