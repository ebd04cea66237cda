package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/registry"
)

// deploymentRows are the route × token kind rows of the deployment, build and webhook routes,
// on agent agentID, which gets a hosted source, a ready production deployment and an active
// preview-x deployment first.
func deploymentRows(t *testing.T, h *harness, agentID string) []routeCase {
	t.Helper()
	put := h.do(request{method: "PUT", path: "/api/agents/" + agentID + "/source", token: h.admin, body: map[string]any{"type": "hosted"}})
	if put.Code != 200 {
		t.Fatalf("put source = %d %s", put.Code, put.Body)
	}
	up := h.do(request{method: "POST", path: "/api/agents/" + agentID + "/source-versions", token: h.admin, body: map[string]any{"files": fixtureFiles(t, "hello")}})
	if up.Code != 201 {
		t.Fatalf("upload = %d %s", up.Code, up.Body)
	}
	prod := h.deploy(agentID, "production")
	h.deploy(agentID, "preview-x")
	ping, err := os.ReadFile(filepath.Join("..", "webhook", "testdata", "github", "ping.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := "/api/deployments/" + prod.DeployID
	get := func(path string) func() request { return func() request { return request{method: "GET", path: path} } }
	post := func(path string, body any) func() request {
		return func() request { return request{method: "POST", path: path, body: body} }
	}
	a := "/api/agents/" + agentID
	return []routeCase{
		{method: "POST", path: "/api/deployments/redeploy", need: auth.Operator, boundOther: 403, ok: 200,
			call: post("/api/deployments/redeploy", map[string]any{"agentId": agentID, "environment": "preview-y", "reuseBuild": true})},
		{method: "GET", path: "/api/deployments/:deployId", need: auth.Observer, boundOther: 404, ok: 200, call: get(d)},
		{method: "POST", path: "/api/deployments/:deployId/activate", need: auth.Operator, boundOther: 404, ok: 200, call: post(d+"/activate", nil)},
		{method: "POST", path: "/api/deployments/promote", need: auth.Operator, boundOther: 403, ok: 200,
			call: post("/api/deployments/promote", map[string]any{"agentId": agentID, "fromEnvironment": "preview-x"})},
		{method: "POST", path: "/api/deployments/rollback", need: auth.Operator, boundOther: 403, ok: 200,
			call: post("/api/deployments/rollback", map[string]any{"agentId": agentID})},
		{method: "GET", path: "/api/deployments/:deployId/snapshot", need: auth.Observer, boundOther: 404, ok: 200, call: get(d + "/snapshot")},
		{method: "POST", path: "/api/deployments/:deployId/evals", need: auth.Operator, boundOther: 404, ok: 202, call: post(d+"/evals", nil)},
		{method: "GET", path: "/api/deployments/:deployId/evals", need: auth.Observer, boundOther: 404, ok: 200, call: get(d + "/evals")},
		{method: "POST", path: "/api/deployments/:deployId/runtime/stop", need: auth.Operator, boundOther: 404, ok: 200, call: post(d+"/runtime/stop", nil)},
		{method: "POST", path: "/api/deployments/:deployId/runtime/start", need: auth.Operator, boundOther: 404, ok: 200, call: post(d+"/runtime/start", nil)},
		{method: "GET", path: "/api/agents/:id/deployments", need: auth.Observer, agent: true, ok: 200, call: get(a + "/deployments?environment=production")},
		{method: "GET", path: "/api/agents/:id/active-deployment", need: auth.Observer, agent: true, ok: 200, call: get(a + "/active-deployment")},
		{method: "GET", path: "/api/agents/:id/activations", need: auth.Observer, agent: true, ok: 200, call: get(a + "/activations")},
		{method: "GET", path: "/api/builds/:buildId/status", need: auth.Observer, boundOther: 404, ok: 200, call: get("/api/builds/" + prod.BuildID + "/status")},
		{method: "GET", path: "/api/builds/:buildId/logs", need: auth.Observer, boundOther: 404, ok: 200, call: get("/api/builds/" + prod.BuildID + "/logs")},
		{method: "POST", path: "/webhooks/:host", ok: 200, call: func() request {
			return request{method: "POST", path: "/webhooks/github", body: ping, header: map[string]string{"X-GitHub-Event": "ping"}}
		}},
	}
}

type deployment struct {
	DeployID    string `json:"deployId"`
	BuildID     string `json:"buildId"`
	Environment string `json:"environment"`
	Status      string `json:"status"`
	IsActive    bool   `json:"isActive"`
	Commit      string `json:"commit"`
	URL         string `json:"url"`
	Runtime     string `json:"runtime"`
	Error       string `json:"error"`
}

// deploy redeploys the agent's newest source version into env and waits until the build ended.
func (h *harness) deploy(agentID, env string) deployment {
	h.t.Helper()
	rec := h.do(request{method: "POST", path: "/api/deployments/redeploy", token: h.admin, body: map[string]any{"agentId": agentID, "environment": env}})
	if rec.Code != 200 {
		h.t.Fatalf("redeploy = %d %s", rec.Code, rec.Body)
	}
	var out struct{ DeployID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		h.t.Fatal(err)
	}
	return h.waitDeployment(out.DeployID)
}

func (h *harness) waitDeployment(id string) deployment {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		d := h.getDeployment(id)
		if d.Status == registry.StatusReady || d.Status == registry.StatusFailed {
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("deployment %s never finished", id)
	return deployment{}
}

func (h *harness) getDeployment(id string) deployment {
	h.t.Helper()
	rec := h.do(request{method: "GET", path: "/api/deployments/" + id, token: h.admin})
	if rec.Code != 200 {
		h.t.Fatalf("get deployment = %d %s", rec.Code, rec.Body)
	}
	var d deployment
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
		h.t.Fatal(err)
	}
	return d
}

func (h *harness) active(agentID, env string) (deployment, int) {
	h.t.Helper()
	rec := h.do(request{method: "GET", path: "/api/agents/" + agentID + "/active-deployment?environment=" + env, token: h.admin})
	var d deployment
	if rec.Code == 200 {
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			h.t.Fatal(err)
		}
	}
	return d, rec.Code
}

func queuedBuild(agentID string) registry.BuildRequest {
	return registry.BuildRequest{AgentID: agentID, Environment: "production", Commit: strings.Repeat("c", 40), Trigger: "test"}
}

// TestDeploymentsPaged: GET /api/agents/{id}/deployments answers its bare array without ?limit=
// and ?before=, and a page {deployments, next?} with either, whose next leads through every
// deployment once, newest first; ?active=true keeps the active ones.
func TestDeploymentsPaged(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		id := h.createAgent("Paged")
		now := time.Now().UTC().Truncate(time.Millisecond)
		var want []string
		for j := range 25 {
			created := now.Add(-time.Duration(j) * time.Minute)
			d := registry.Deployment{ID: fmt.Sprintf("d%03d", 100-j), AgentID: id, BuildID: fmt.Sprintf("b%03d", j), Environment: []string{"production", "staging"}[j%2],
				Status: registry.StatusReady, IsActive: j < 2, CreatedAt: created, ReadyAt: &created}
			if err := db.Create(&d).Error; err != nil {
				t.Fatal(err)
			}
			want = append(want, d.ID)
		}
		type dep struct {
			DeployID string `json:"deployId"`
			IsActive bool   `json:"isActive"`
		}
		ids := func(ds []dep) []string {
			out := []string{}
			for _, d := range ds {
				out = append(out, d.DeployID)
			}
			return out
		}
		base := "/api/agents/" + id + "/deployments"
		var all []dep
		h.call("GET", base, h.admin, nil, http.StatusOK, &all)
		if got := ids(all); !slices.Equal(got, want) {
			t.Errorf("GET deployments = %v, want %v", got, want)
		}
		var got []string
		pages := 0
		for next := ""; pages == 0 || next != ""; pages++ {
			var page struct {
				Deployments []dep
				Next        string
			}
			path := base + "?limit=10"
			if next != "" {
				path += "&before=" + next
			}
			h.call("GET", path, h.admin, nil, http.StatusOK, &page)
			got = append(got, ids(page.Deployments)...)
			next = page.Next
		}
		if pages != 3 || !slices.Equal(got, want) {
			t.Errorf("%d pages of 10 = %v, want 3 pages of %v", pages, got, want)
		}
		var active struct{ Deployments []dep }
		h.call("GET", base+"?active=true&limit=5", h.admin, nil, http.StatusOK, &active)
		if got := ids(active.Deployments); !slices.Equal(got, want[:2]) {
			t.Errorf("active = %v, want %v", got, want[:2])
		}
		var staging struct {
			Deployments []dep
			Next        string
		}
		h.call("GET", base+"?environment=staging&limit=20", h.admin, nil, http.StatusOK, &staging)
		if len(staging.Deployments) != 12 || staging.Next != "" {
			t.Errorf("staging = %d deployments, next %q; want 12 and no next", len(staging.Deployments), staging.Next)
		}
		for _, q := range []string{"?limit=0", "?before=nope", "?active=yes", "?page=2"} {
			if rec := h.do(request{method: "GET", path: base + q, token: h.admin}); rec.Code != http.StatusBadRequest {
				t.Errorf("GET deployments%s = %d %s, want 400", q, rec.Code, rec.Body.String())
			}
		}
	})
}
