package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
)

// TestRoutesTakeTheSlug: every route that names an agent takes its id or its slug alike, in the
// path and in a body's agentId; an unknown slug is 404 NOT_FOUND naming it, and a token bound
// to one agent gets the same 403 for another agent's slug as for a slug nobody has.
func TestRoutesTakeTheSlug(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		id := h.createAgent("Support Desk")
		other := h.createAgent("Other")
		const slug = "support-desk"

		var a agentAnswer
		h.call("GET", "/api/agents/"+slug, h.admin, nil, http.StatusOK, &a)
		if a.AgentID != id || a.Slug != slug {
			t.Errorf("GET /api/agents/%s = %+v, want agent %s", slug, a, id)
		}
		var s settingsAnswer
		h.call("PUT", "/api/agents/"+slug+"/deploy-settings", h.admin, map[string]any{"autoDeploy": true}, http.StatusOK, &s)
		h.call("GET", "/api/agents/"+id+"/deploy-settings", h.admin, nil, http.StatusOK, &s)
		if !s.AutoDeploy {
			t.Errorf("settings changed through the slug are not the agent's: %+v", s)
		}
		var tok struct{ Token string }
		h.call("POST", "/api/agents/"+slug+"/tokens", h.admin, map[string]any{"ttl": 60}, http.StatusCreated, &tok)
		if claims, err := h.signer.Verify(tok.Token); err != nil || claims.AgentID != id {
			t.Errorf("runtime token minted through the slug = %+v, %v; want one for %s", claims, err, id)
		}

		// A body's agentId: redeploy, promote and rollback, and a token's binding.
		h.call("POST", "/api/agents/"+slug+"/source-versions", h.admin, map[string]any{"files": fixtureFiles(t, "hello")}, http.StatusCreated, nil)
		var rd struct{ DeployID string }
		h.call("POST", "/api/deployments/redeploy", h.admin, map[string]any{"agentId": slug, "environment": "preview"}, http.StatusOK, &rd)
		var d struct{ AgentID, Status string }
		for deadline := time.Now().Add(time.Minute); d.Status != "ready" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			h.call("GET", "/api/deployments/"+rd.DeployID, h.admin, nil, http.StatusOK, &d)
		}
		if d.AgentID != id || d.Status != "ready" {
			t.Fatalf("deployment redeployed by slug = %+v, want ready for %s", d, id)
		}
		h.call("POST", "/api/deployments/promote", h.admin, map[string]any{"agentId": slug, "fromEnvironment": "preview"}, http.StatusOK, &d)
		if d.AgentID != id {
			t.Errorf("promote by slug made a deployment of %s", d.AgentID)
		}
		var made struct{ AgentID *string }
		h.call("POST", "/api/tokens", h.admin, map[string]any{"name": "bound", "kind": "observer", "agentId": slug}, http.StatusCreated, &made)
		if made.AgentID == nil || *made.AgentID != id {
			t.Errorf("token bound by slug = %v, want bound to %s", made.AgentID, id)
		}

		// Unknown slugs.
		for _, r := range []request{
			{method: "GET", path: "/api/agents/nope"},
			{method: "PUT", path: "/api/agents/nope/secrets/X", body: map[string]any{"value": "v"}},
			{method: "GET", path: "/api/agents/nope/secrets"},
			{method: "DELETE", path: "/api/agents/nope/secrets/X"},
		} {
			r.token = h.admin
			rec := h.do(r)
			if rec.Code != http.StatusNotFound || errorOf(t, rec).Error.Code != "NOT_FOUND" || !strings.Contains(rec.Body.String(), `\"nope\"`) {
				t.Errorf("%s %s = %d %s, want 404 NOT_FOUND naming the slug", r.method, r.path, rec.Code, rec.Body.String())
			}
		}
		if rec := h.do(request{method: "POST", path: "/api/deployments/redeploy", token: h.admin, body: map[string]any{"agentId": "nope"}}); rec.Code != http.StatusNotFound {
			t.Errorf("redeploy of an unknown slug = %d %s, want 404", rec.Code, rec.Body.String())
		}
		if rec := h.do(request{method: "POST", path: "/api/tokens", token: h.admin, body: map[string]any{"name": "x", "kind": "observer", "agentId": "nope"}}); rec.Code != 400 || errorOf(t, rec).Error.Field != "agentId" {
			t.Errorf("a token bound to an unknown slug = %d %s, want 400 naming agentId", rec.Code, rec.Body.String())
		}

		// A bound token: its own agent by slug; any other slug, known or not, the same 403.
		_, bound := h.mintToken(auth.Admin, id)
		h.call("GET", "/api/agents/"+slug, bound, nil, http.StatusOK, nil)
		h.call("POST", "/api/tokens", bound, map[string]any{"name": "mine", "kind": "observer", "agentId": slug}, http.StatusCreated, nil)
		var bodies []string
		for _, ref := range []string{"other", other, "nope"} {
			rec := h.do(request{method: "GET", path: "/api/agents/" + ref + "/secrets", token: bound})
			if rec.Code != http.StatusForbidden {
				t.Errorf("bound token on %s = %d %s, want 403", ref, rec.Code, rec.Body.String())
			}
			bodies = append(bodies, errorOf(t, rec).Error.Message)
			if rec := h.do(request{method: "POST", path: "/api/tokens", token: bound, body: map[string]any{"name": "x", "kind": "observer", "agentId": ref}}); rec.Code != http.StatusForbidden {
				t.Errorf("bound token binding a token to %s = %d %s, want 403", ref, rec.Code, rec.Body.String())
			}
		}
		if bodies[0] != bodies[1] || bodies[1] != bodies[2] {
			t.Errorf("a bound token can tell other agents apart: %q", bodies)
		}
	})
}

// TestSecretRoutes: set, list (names and times, never values) and remove an agent's secrets.
func TestSecretRoutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		h.createAgent("desk")
		before := time.Now().Add(-time.Second)
		for _, name := range []string{"SUPPORT_DB_URL", "API_KEY"} {
			h.call("PUT", "/api/agents/desk/secrets/"+name, h.admin, map[string]any{"value": "value-of-" + name}, http.StatusNoContent, nil)
		}
		var list struct {
			Secrets []struct {
				Name      string    `json:"name"`
				UpdatedAt time.Time `json:"updatedAt"`
			} `json:"secrets"`
		}
		h.call("GET", "/api/agents/desk/secrets", h.admin, nil, http.StatusOK, &list)
		if len(list.Secrets) != 2 || list.Secrets[0].Name != "API_KEY" || list.Secrets[1].Name != "SUPPORT_DB_URL" ||
			list.Secrets[0].UpdatedAt.Before(before) || time.Since(list.Secrets[0].UpdatedAt) > time.Minute {
			t.Errorf("GET secrets = %+v, want API_KEY and SUPPORT_DB_URL, set just now", list)
		}
		if body := h.bodies[len(h.bodies)-1]; strings.Contains(body, "value-of-") {
			t.Errorf("the list shows a value: %s", body)
		}

		h.call("DELETE", "/api/agents/desk/secrets/API_KEY", h.admin, nil, http.StatusNoContent, nil)
		h.call("GET", "/api/agents/desk/secrets", h.admin, nil, http.StatusOK, &list)
		if len(list.Secrets) != 1 || list.Secrets[0].Name != "SUPPORT_DB_URL" {
			t.Errorf("GET secrets after DELETE = %+v", list)
		}
		rec := h.do(request{method: "DELETE", path: "/api/agents/desk/secrets/API_KEY", token: h.admin})
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "API_KEY") {
			t.Errorf("DELETE of a secret that is not set = %d %s, want 404 naming it", rec.Code, rec.Body.String())
		}
		rec = h.do(request{method: "DELETE", path: "/api/agents/desk/secrets/bad-name", token: h.admin})
		if rec.Code != http.StatusBadRequest || errorOf(t, rec).Error.Field != "name" {
			t.Errorf("DELETE of a bad name = %d %s, want 400 naming name", rec.Code, rec.Body.String())
		}
		_, operator := h.mintToken(auth.Operator, "")
		if rec := h.do(request{method: "GET", path: "/api/agents/desk/secrets", token: operator}); rec.Code != http.StatusForbidden {
			t.Errorf("GET secrets with an operator token = %d, want 403 (admin only)", rec.Code)
		}
	})
}
