package api_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/registry"
)

type agentAnswer struct {
	AgentID string `json:"agentId"`
	Slug    string `json:"slug"`
	Name    string `json:"name"`
	URL     string `json:"url"`
	Source  *struct {
		Type             string `json:"type"`
		URL              string `json:"url"`
		DefaultBranch    string `json:"defaultBranch"`
		Credentials      string `json:"credentials"`
		HasWebhookSecret bool   `json:"hasWebhookSecret"`
	} `json:"source"`
	Settings settingsAnswer `json:"settings"`
}

type settingsAnswer struct {
	ProductionBranch      string `json:"productionBranch"`
	AutoDeploy            bool   `json:"autoDeploy"`
	AutoPromoteProduction bool   `json:"autoPromoteProduction"`
}

func TestAgentsRoutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)

		var a agentAnswer
		h.call("POST", "/api/agents", h.admin, map[string]any{"name": "Support Desk"}, http.StatusCreated, &a)
		if a.Slug != "support-desk" || a.Name != "Support Desk" || a.URL != "http://support-desk.apps.localhost:8080" || a.Source != nil ||
			a.Settings != (settingsAnswer{ProductionBranch: "main"}) {
			t.Errorf("POST /api/agents = %+v", a)
		}
		var b agentAnswer
		h.call("POST", "/api/agents", h.admin, map[string]any{"name": "Other", "slug": "my-bot"}, http.StatusCreated, &b)
		if b.Slug != "my-bot" {
			t.Errorf("explicit slug = %q", b.Slug)
		}
		rec := h.do(request{method: "POST", path: "/api/agents", token: h.admin, body: map[string]any{"name": "Dup", "slug": "my-bot"}})
		if rec.Code != http.StatusConflict || errorOf(t, rec).Error.Code != "CONFLICT" || !strings.Contains(rec.Body.String(), "my-bot") {
			t.Errorf("taken slug = %d %s, want 409 CONFLICT naming the slug", rec.Code, rec.Body.String())
		}

		// The source and settings show up on the agent; the webhook secret never does.
		var src map[string]any
		h.call("PUT", "/api/agents/"+a.AgentID+"/source", h.admin, map[string]any{
			"type": "git", "url": "git@github.com:acme/desk.git", "defaultBranch": "trunk", "webhookSecret": "whsec-do-not-show", "credentials": "env:GIT_TOKEN",
		}, http.StatusOK, &src)
		if src["hasWebhookSecret"] != true || src["defaultBranch"] != "trunk" || src["type"] != "git" {
			t.Errorf("PUT source = %v", src)
		}
		var got agentAnswer
		h.call("GET", "/api/agents/"+a.AgentID, h.admin, nil, http.StatusOK, &got)
		if got.Source == nil || got.Source.URL != "git@github.com:acme/desk.git" || !got.Source.HasWebhookSecret || got.Settings.ProductionBranch != "trunk" {
			t.Errorf("GET agent = %+v", got)
		}
		if strings.Contains(h.bodies[len(h.bodies)-1], "whsec-do-not-show") { // the leak test checks every response too
			t.Error("GET agent shows the webhook secret")
		}
		// The secret is kept sealed and usable by webhooks.
		sources := registry.NewSources(db, mustCipher(t), func(s string) string { return s })
		if s, err := sources.Get(context.Background(), a.AgentID); err != nil || s.WebhookSecret != "whsec-do-not-show" {
			t.Errorf("stored source = %+v, %v", s, err)
		}

		// The list holds both, in creation order; a bound token sees only its own agent.
		var list struct {
			Agents []agentAnswer `json:"agents"`
		}
		h.call("GET", "/api/agents", h.admin, nil, http.StatusOK, &list)
		if len(list.Agents) != 2 || list.Agents[0].AgentID != a.AgentID || list.Agents[0].Source == nil || list.Agents[1].AgentID != b.AgentID {
			t.Errorf("GET /api/agents = %+v", list)
		}
		_, bound := h.mintToken(auth.Observer, b.AgentID)
		h.call("GET", "/api/agents", bound, nil, http.StatusOK, &list)
		if len(list.Agents) != 1 || list.Agents[0].AgentID != b.AgentID {
			t.Errorf("GET /api/agents with a bound token = %+v, want only %s", list, b.AgentID)
		}

		// Hosted source replaces git whole.
		src = nil
		h.call("PUT", "/api/agents/"+a.AgentID+"/source", h.admin, map[string]any{"type": "hosted"}, http.StatusOK, &src)
		if src["type"] != "hosted" || src["hasWebhookSecret"] != false || src["url"] != nil {
			t.Errorf("PUT hosted source = %v", src)
		}
		rec = h.do(request{method: "PUT", path: "/api/agents/" + a.AgentID + "/source", token: h.admin,
			body: map[string]any{"type": "git", "url": "https://user:pass@github.com/acme/x.git"}})
		if rec.Code != 400 || errorOf(t, rec).Error.Field != "url" || strings.Contains(rec.Body.String(), "pass@") {
			t.Errorf("URL with a password = %d %s, want 400 for url without echoing it", rec.Code, rec.Body.String())
		}
	})
}

func mustCipher(t *testing.T) *registry.Cipher {
	t.Helper()
	c, err := registry.NewCipher([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSettingsRoutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		id := h.createAgent("settings")
		for _, path := range []string{"/deploy-settings", "/settings"} {
			var s settingsAnswer
			h.call("GET", "/api/agents/"+id+path, h.admin, nil, http.StatusOK, &s)
			if s != (settingsAnswer{ProductionBranch: "main"}) {
				t.Errorf("GET %s defaults = %+v", path, s)
			}
		}
		h.call("PUT", "/api/agents/"+id+"/source", h.admin, map[string]any{"type": "git", "url": "https://x.test/a/b", "defaultBranch": "develop"}, http.StatusOK, nil)
		var s settingsAnswer
		h.call("GET", "/api/agents/"+id+"/deploy-settings", h.admin, nil, http.StatusOK, &s)
		if s.ProductionBranch != "develop" {
			t.Errorf("productionBranch with a git source = %q, want the source's default branch", s.ProductionBranch)
		}
		h.call("PUT", "/api/agents/"+id+"/deploy-settings", h.admin, map[string]any{"autoDeploy": true}, http.StatusOK, &s)
		if s != (settingsAnswer{ProductionBranch: "develop", AutoDeploy: true}) {
			t.Errorf("PUT autoDeploy = %+v", s)
		}
		h.call("PUT", "/api/agents/"+id+"/settings", h.admin, map[string]any{"productionBranch": "release", "autoPromoteProduction": true}, http.StatusOK, &s)
		if s != (settingsAnswer{ProductionBranch: "release", AutoDeploy: true, AutoPromoteProduction: true}) {
			t.Errorf("PUT branch and autoPromote = %+v", s)
		}
		h.call("PUT", "/api/agents/"+id+"/deploy-settings", h.admin, map[string]any{}, http.StatusOK, &s)
		if s != (settingsAnswer{ProductionBranch: "release", AutoDeploy: true, AutoPromoteProduction: true}) {
			t.Errorf("PUT {} changed settings: %+v", s)
		}
		rec := h.do(request{method: "PUT", path: "/api/agents/" + id + "/deploy-settings", token: h.admin, body: map[string]any{"productionBranch": "a..b"}})
		if rec.Code != 400 || errorOf(t, rec).Error.Field != "productionBranch" {
			t.Errorf("bad branch = %d %s", rec.Code, rec.Body.String())
		}
	})
}

func TestSecretsCommitStatusesAndKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		id := h.createAgent("secrets")

		rec := h.do(request{method: "PUT", path: "/api/agents/" + id + "/secrets/OPENAI_API_KEY", token: h.admin, body: map[string]any{"value": "sk-value-1"}})
		if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
			t.Fatalf("PUT secret = %d %q, want 204 and no body", rec.Code, rec.Body.String())
		}
		if v, ok, err := registry.NewSecrets(db, mustCipher(t)).Resolve(ctx, id, "OPENAI_API_KEY"); v != "sk-value-1" || !ok || err != nil {
			t.Errorf("Resolve = %q, %v, %v", v, ok, err)
		}
		big := strings.Repeat("x", registry.MaxSecretSize+1)
		if rec := h.do(request{method: "PUT", path: "/api/agents/" + id + "/secrets/BIG", token: h.admin, body: map[string]any{"value": big}}); rec.Code != 400 {
			t.Errorf("secret over the limit = %d", rec.Code)
		}

		sha := strings.Repeat("c", 40)
		var st map[string]any
		h.call("POST", "/api/agents/"+id+"/commit-statuses", h.admin, map[string]any{"commit": sha, "state": "pending"}, http.StatusCreated, &st)
		if st["context"] != "svc/evals" || st["state"] != "pending" || st["commit"] != sha {
			t.Errorf("POST commit status = %v", st)
		}
		h.call("POST", "/api/agents/"+id+"/commit-statuses", h.admin, map[string]any{"commit": sha, "context": "svc/evals", "state": "failure", "description": "2 of 3 evals failed"}, http.StatusCreated, nil)
		latest, err := registry.NewCommitStatuses(db).Latest(ctx, id, sha, registry.EvalsContext)
		if err != nil || latest.State != registry.StateFailure || latest.Description != "2 of 3 evals failed" {
			t.Errorf("Latest = %+v, %v", latest, err)
		}

		var key struct {
			ID, Key, Name string
		}
		h.call("POST", "/api/agents/"+id+"/api-keys", h.admin, map[string]any{"name": "website"}, http.StatusCreated, &key)
		if !strings.HasPrefix(key.Key, auth.AgentKeyPrefix) || key.ID == "" || key.Name != "website" {
			t.Errorf("POST api-keys = %+v", key)
		}
		if k, err := h.apiKeys.Authenticate(ctx, key.Key); err != nil || k.AgentID != id {
			t.Errorf("the new key does not authenticate for its agent: %+v, %v", k, err)
		}
		// It can never control the platform.
		if rec := h.do(request{method: "GET", path: "/api/agents/" + id, token: key.Key}); rec.Code != 403 || !strings.Contains(rec.Body.String(), `"FORBIDDEN"`) {
			t.Errorf("ak_ key on the platform API = %d %s, want 403 FORBIDDEN", rec.Code, rec.Body.String())
		}
		// The list shows it, without its value; revoking removes it; a second revoke is 404.
		var list struct {
			Items []map[string]any `json:"apiKeys"`
		}
		h.call("GET", "/api/agents/"+id+"/api-keys", h.admin, nil, http.StatusOK, &list)
		if len(list.Items) != 1 || list.Items[0]["id"] != key.ID || list.Items[0]["name"] != "website" || list.Items[0]["lastUsedAt"] != nil || list.Items[0]["createdAt"] == nil {
			t.Errorf("GET api-keys = %+v", list.Items)
		}
		if _, ok := list.Items[0]["key"]; ok || strings.Contains(fmt.Sprint(list.Items), key.Key) {
			t.Errorf("GET api-keys shows the key's value: %+v", list.Items)
		}
		h.call("DELETE", "/api/agents/"+id+"/api-keys/"+key.ID, h.admin, nil, http.StatusNoContent, nil)
		h.call("DELETE", "/api/agents/"+id+"/api-keys/"+key.ID, h.admin, nil, http.StatusNotFound, nil)
		h.call("GET", "/api/agents/"+id+"/api-keys", h.admin, nil, http.StatusOK, &list)
		if len(list.Items) != 0 {
			t.Errorf("GET api-keys after revoke = %+v, want none", list.Items)
		}
		if _, err := h.apiKeys.Authenticate(ctx, key.Key); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("a revoked key authenticates: %v", err)
		}
	})
}

func TestTokenRoutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		a := h.createAgent("a")
		b := h.createAgent("b")

		var tok struct {
			ID      string  `json:"id"`
			Token   string  `json:"token"`
			Kind    string  `json:"kind"`
			AgentID *string `json:"agentId"`
		}
		h.call("POST", "/api/tokens", h.admin, map[string]any{"name": "ci", "kind": "operator", "agentId": a}, http.StatusCreated, &tok)
		if !strings.HasPrefix(tok.Token, "pk_") || tok.Kind != "operator" || tok.AgentID == nil || *tok.AgentID != a {
			t.Fatalf("POST /api/tokens = %+v", tok)
		}
		// It works, bound to its agent.
		h.call("PUT", "/api/agents/"+a+"/deploy-settings", tok.Token, map[string]any{"autoDeploy": true}, http.StatusOK, nil)
		h.call("PUT", "/api/agents/"+b+"/deploy-settings", tok.Token, map[string]any{"autoDeploy": true}, http.StatusForbidden, nil)
		// Revoked, it stops at once.
		h.call("DELETE", "/api/tokens/"+tok.ID, h.admin, nil, http.StatusNoContent, nil)
		h.call("GET", "/api/agents/"+a, tok.Token, nil, http.StatusUnauthorized, nil)
		h.call("DELETE", "/api/tokens/"+tok.ID, h.admin, nil, http.StatusNotFound, nil)
		h.call("DELETE", "/api/tokens/tnosuchtoken", h.admin, nil, http.StatusNotFound, nil)

		var unbound struct {
			AgentID *string `json:"agentId"`
		}
		h.call("POST", "/api/tokens", h.admin, map[string]any{"name": "all", "kind": "observer"}, http.StatusCreated, &unbound)
		if unbound.AgentID != nil {
			t.Errorf("unbound token agentId = %v, want null", *unbound.AgentID)
		}
		rec := h.do(request{method: "POST", path: "/api/tokens", token: h.admin, body: map[string]any{"name": "x", "kind": "admin", "agentId": "anosuchagent"}})
		if rec.Code != 400 || errorOf(t, rec).Error.Field != "agentId" {
			t.Errorf("token for a missing agent = %d %s, want 400 for agentId", rec.Code, rec.Body.String())
		}

		// A bound admin manages only its own agent's tokens.
		_, boundAdmin := h.mintToken(auth.Admin, a)
		h.call("POST", "/api/tokens", boundAdmin, map[string]any{"name": "x", "kind": "observer"}, http.StatusForbidden, nil)
		h.call("POST", "/api/tokens", boundAdmin, map[string]any{"name": "x", "kind": "observer", "agentId": b}, http.StatusForbidden, nil)
		h.call("POST", "/api/tokens", boundAdmin, map[string]any{"name": "x", "kind": "admin", "agentId": a}, http.StatusCreated, nil)
		ofB, _ := h.mintToken(auth.Observer, b)
		ofA, _ := h.mintToken(auth.Observer, a)
		unboundTok, _ := h.mintToken(auth.Observer, "")
		h.call("DELETE", "/api/tokens/"+ofB.ID, boundAdmin, nil, http.StatusNotFound, nil)
		h.call("DELETE", "/api/tokens/"+unboundTok.ID, boundAdmin, nil, http.StatusNotFound, nil)
		h.call("DELETE", "/api/tokens/"+ofA.ID, boundAdmin, nil, http.StatusNoContent, nil)
		h.call("POST", "/api/agents", boundAdmin, map[string]any{"name": "new"}, http.StatusForbidden, nil)
	})
}

func TestRuntimeTokens(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	id := h.createAgent("chat")
	path := "/api/agents/" + id + "/tokens"

	type answer struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expiresAt"`
	}
	var out answer
	before := time.Now()
	h.call("POST", path, h.admin, map[string]any{"scope_id": "team-1", "user_id": "u-7"}, http.StatusCreated, &out)
	after := time.Now()
	claims, err := h.signer.Verify(out.Token)
	if err != nil {
		t.Fatal(err)
	}
	if claims.AgentID != id || claims.ScopeID != "team-1" || claims.UserID != "u-7" {
		t.Errorf("claims = %+v", claims)
	}
	if lo, hi := before.Add(auth.DefaultRuntimeTTL).Truncate(time.Second), after.Add(auth.DefaultRuntimeTTL); claims.ExpiresAt.Before(lo) || claims.ExpiresAt.After(hi) {
		t.Errorf("expiry %v outside [%v, %v]: the default ttl is not %v", claims.ExpiresAt, lo, hi, auth.DefaultRuntimeTTL)
	}
	if got := claims.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z07:00"); got != out.ExpiresAt {
		t.Errorf("expiresAt = %s, token says %s", out.ExpiresAt, got)
	}
	// The edges of ttl: 60 and 86400 pass, 59 and 86401 fail (TestStrictJSON), 0 fails too.
	for _, ttl := range []int{60, 86400} {
		h.call("POST", path, h.admin, map[string]any{"ttl": ttl}, http.StatusCreated, &out)
	}
	h.call("POST", path, h.admin, map[string]any{"ttl": 0}, http.StatusBadRequest, nil)
	h.call("POST", path, h.admin, map[string]any{"scope_id": strings.Repeat("s", 257)}, http.StatusBadRequest, nil)
	// A runtime token is no platform credential.
	h.call("GET", "/api/agents/"+id, out.Token, nil, http.StatusUnauthorized, nil)
}

func TestHealthAndMetrics(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	id := h.createAgent("m")
	var health map[string]any
	h.call("GET", "/health", "", nil, http.StatusOK, &health)
	if health["status"] != "ok" {
		t.Errorf("health = %v", health)
	}
	h.call("GET", "/api/agents/"+id, h.admin, nil, http.StatusOK, nil)
	h.call("GET", "/api/agents/"+id, "", nil, http.StatusUnauthorized, nil)
	rec := h.do(request{method: "GET", path: "/metrics"})
	body := rec.Body.String()
	for _, want := range []string{
		`svc_http_requests_total{method="GET",route="/api/agents/:id",status="200"} 1`,
		`svc_http_requests_total{method="GET",route="/api/agents/:id",status="401"} 1`,
		`svc_http_requests_total{method="POST",route="/api/agents",status="201"} 1`,
		`svc_http_request_duration_seconds_bucket{method="GET",route="/api/agents/:id",le=`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, id) {
		t.Error("/metrics labels carry an agent id; routes must be templates")
	}
	// The database going away makes /health a 503.
	sqlDB, err := h.db.DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlDB.Close(); err != nil {
		t.Fatal(err)
	}
	rec = h.do(request{method: "GET", path: "/health"})
	if rec.Code != http.StatusServiceUnavailable || errorOf(t, rec).Error.Code != "UNAVAILABLE" {
		t.Errorf("health without a database = %d %s", rec.Code, rec.Body.String())
	}
}

// TestListAgentsQueries: GET /api/agents reads the agents, their sources and their settings in
// a constant number of queries, not one or two per agent (201 for 100 agents before).
func TestListAgentsQueries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		var queries atomic.Int64
		// Only the tables of the agents list: the build queue polls its own beside the test.
		count := func(tx *gorm.DB) {
			switch tx.Statement.Table {
			case "agents", "sources", "deploy_settings":
				queries.Add(1)
			}
		}
		if err := db.Callback().Query().After("gorm:query").Register("test:count", count); err != nil {
			t.Fatal(err)
		}
		list := func() (int, int64) {
			queries.Store(0)
			var out struct{ Agents []agentAnswer }
			h.call("GET", "/api/agents", h.admin, nil, http.StatusOK, &out)
			return len(out.Agents), queries.Load()
		}
		var first string
		for i := range 3 {
			id := h.createAgent(fmt.Sprintf("Few %d", i))
			first = cmp.Or(first, id)
		}
		h.call("PUT", "/api/agents/"+first+"/source", h.admin, map[string]any{"type": "git", "url": "https://git.example/acme/few.git", "defaultBranch": "trunk"}, http.StatusOK, nil)
		nFew, few := list()
		for i := range 30 {
			h.createAgent(fmt.Sprintf("Many %d", i))
		}
		nMany, many := list()
		if nFew != 3 || nMany != 33 {
			t.Fatalf("listed %d then %d agents, want 3 then 33", nFew, nMany)
		}
		if few != many || many > 4 {
			t.Errorf("GET /api/agents made %d queries for 3 agents and %d for 33, want the same few (at most 4)", few, many)
		}
		var out struct{ Agents []agentAnswer }
		h.call("GET", "/api/agents", h.admin, nil, http.StatusOK, &out)
		for _, a := range out.Agents {
			want := "main"
			if a.AgentID == first {
				if a.Source == nil || a.Source.URL != "https://git.example/acme/few.git" {
					t.Errorf("agent %s source = %+v", a.AgentID, a.Source)
				}
				want = "trunk"
			} else if a.Source != nil {
				t.Errorf("agent %s has a source %+v", a.AgentID, a.Source)
			}
			if a.Settings.ProductionBranch != want {
				t.Errorf("agent %s production branch = %q, want %q", a.AgentID, a.Settings.ProductionBranch, want)
			}
		}
	})
}
