package api_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/runner/sessions"
)

// caller is one column of the route × token kind table.
type caller struct {
	name  string
	token string
	kind  auth.Kind // "" for every credential that is not a valid pk_ token
	bound string    // "this", "other" or "" (unbound)
}

// routeCase is one row: a valid call of a route, the least kind it needs (spec table 2.4) and
// its success status.
type routeCase struct {
	method, path string // path is the gin template, for the coverage check
	need         auth.Kind
	agent        bool // acts on the agent in the path
	ok           int
	// boundOther, when set, is what a token bound to another agent gets: routes that find their
	// agent through a deployment or build answer 404 (no probing), body-named agents 403.
	boundOther int
	call       func() request
}

func TestRouteTokenKindTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		agentA := h.createAgent("Agent A")
		agentB := h.createAgent("Agent B")
		hello := fixtureFiles(t, "hello")

		_, akKey, err := h.apiKeys.Create(ctx, agentA, "key")
		if err != nil {
			t.Fatal(err)
		}
		jwt, err := h.signer.Mint(auth.RuntimeClaims{AgentID: agentA, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		revokedTok, revoked := h.mintToken(auth.Admin, "")
		if err := h.tokens.Revoke(ctx, revokedTok.ID); err != nil {
			t.Fatal(err)
		}
		_, observer := h.mintToken(auth.Observer, "")
		_, operator := h.mintToken(auth.Operator, "")
		_, otherOperator := h.mintToken(auth.Operator, agentB)
		_, thisOperator := h.mintToken(auth.Operator, agentA)
		_, thisAdmin := h.mintToken(auth.Admin, agentA)
		callers := []caller{
			{name: "none"},
			{name: "garbage", token: "garbage-credential-value"},
			{name: "unknown pk_", token: "pk_" + strings.Repeat("z", 52)},
			{name: "ak_", token: akKey},
			{name: "runtime JWT", token: jwt},
			{name: "revoked admin", token: revoked},
			{name: "observer", token: observer, kind: auth.Observer},
			{name: "operator", token: operator, kind: auth.Operator},
			{name: "admin", token: h.admin, kind: auth.Admin},
			{name: "operator bound to another agent", token: otherOperator, kind: auth.Operator, bound: "other"},
			{name: "operator bound to this agent", token: thisOperator, kind: auth.Operator, bound: "this"},
			{name: "admin bound to this agent", token: thisAdmin, kind: auth.Admin, bound: "this"},
		}

		recordRun(t, db, sessions.Run{ID: "run_authz", AgentID: agentA, SessionID: "ses_authz", Reason: "model_stop",
			StartedAt: time.Now(), EndedAt: time.Now(), Metadata: map[string]string{"userId": "u1", "screen": "home"}})
		sha := strings.Repeat("ab", 20)
		a := "/api/agents/" + agentA
		json := func(method, path string, body any) func() request {
			return func() request { return request{method: method, path: path, body: body} }
		}
		accessDoc := map[string]any{"oidc": map[string]any{"issuer": "https://idp.example", "clientId": "c"}, "allow": map[string]any{"domains": []string{"example.com"}}}
		rows := []routeCase{
			{method: "GET", path: "/health", ok: 200, call: json("GET", "/health", nil)},
			{method: "GET", path: "/metrics", ok: 200, call: json("GET", "/metrics", nil)},
			{method: "GET", path: "/api/openapi.json", ok: 200, call: json("GET", "/api/openapi.json", nil)},
			{method: "POST", path: "/api/tokens", need: auth.Admin, ok: 201,
				call: json("POST", "/api/tokens", map[string]any{"name": "made", "kind": "observer", "agentId": agentA})},
			{method: "GET", path: "/api/tokens/self", need: auth.Observer, ok: 200,
				call: func() request { return request{method: "GET", path: "/api/tokens/self"} }},
			{method: "DELETE", path: "/api/tokens/:tokenId", need: auth.Admin, ok: 204, call: func() request {
				tok, _ := h.mintToken(auth.Observer, agentA)
				return request{method: "DELETE", path: "/api/tokens/" + tok.ID}
			}},
			{method: "POST", path: "/api/agents", need: auth.Admin, ok: 201, call: json("POST", "/api/agents", map[string]any{"name": "made"})},
			{method: "GET", path: "/api/agents", need: auth.Observer, ok: 200, call: json("GET", "/api/agents", nil)},
			{method: "GET", path: "/api/agents/:id", need: auth.Observer, agent: true, ok: 200, call: json("GET", a, nil)},
			{method: "PUT", path: "/api/agents/:id/source", need: auth.Admin, agent: true, ok: 200,
				call: json("PUT", a+"/source", map[string]any{"type": "hosted"})},
			{method: "POST", path: "/api/agents/:id/source-versions", need: auth.Operator, agent: true, ok: 201,
				call: json("POST", a+"/source-versions", map[string]any{"files": hello})},
			{method: "POST", path: "/api/agents/:id/api-keys", need: auth.Admin, agent: true, ok: 201,
				call: json("POST", a+"/api-keys", map[string]any{"name": "k"})},
			{method: "GET", path: "/api/agents/:id/api-keys", need: auth.Admin, agent: true, ok: 200, call: json("GET", a+"/api-keys", nil)},
			{method: "DELETE", path: "/api/agents/:id/api-keys/:keyId", need: auth.Admin, agent: true, ok: 204, call: func() request {
				k, _, err := h.apiKeys.Create(ctx, agentA, "to revoke")
				if err != nil {
					t.Fatal(err)
				}
				return request{method: "DELETE", path: a + "/api-keys/" + k.ID}
			}},
			{method: "PUT", path: "/api/agents/:id/access", need: auth.Admin, agent: true, ok: 200,
				call: json("PUT", a+"/access", accessDoc)},
			{method: "GET", path: "/api/agents/:id/access", need: auth.Admin, agent: true, ok: 200, call: func() request {
				if err := h.stores.Access.Put(ctx, agentA, []byte(`{"oidc":{"issuer":"https://idp.example","clientId":"c"},"allow":{"domains":["example.com"]}}`)); err != nil {
					t.Fatal(err)
				}
				return request{method: "GET", path: a + "/access"}
			}},
			{method: "PUT", path: "/api/agents/:id/secrets/:name", need: auth.Admin, agent: true, ok: 204,
				call: json("PUT", a+"/secrets/API_KEY", map[string]any{"value": "v"})},
			{method: "GET", path: "/api/agents/:id/secrets", need: auth.Admin, agent: true, ok: 200, call: json("GET", a+"/secrets", nil)},
			{method: "DELETE", path: "/api/agents/:id/secrets/:name", need: auth.Admin, agent: true, ok: 204, call: func() request {
				if err := h.stores.Secrets.Put(ctx, agentA, "GONE", "v"); err != nil {
					t.Fatal(err)
				}
				return request{method: "DELETE", path: a + "/secrets/GONE"}
			}},
			{method: "GET", path: "/api/agents/:id/deploy-settings", need: auth.Observer, agent: true, ok: 200, call: json("GET", a+"/deploy-settings", nil)},
			{method: "PUT", path: "/api/agents/:id/deploy-settings", need: auth.Operator, agent: true, ok: 200,
				call: json("PUT", a+"/deploy-settings", map[string]any{"autoDeploy": true})},
			{method: "GET", path: "/api/agents/:id/settings", need: auth.Observer, agent: true, ok: 200, call: json("GET", a+"/settings", nil)},
			{method: "PUT", path: "/api/agents/:id/settings", need: auth.Operator, agent: true, ok: 200,
				call: json("PUT", a+"/settings", map[string]any{"autoPromoteProduction": false})},
			{method: "GET", path: "/api/agents/:id/commit-statuses", need: auth.Observer, agent: true, ok: 200, call: json("GET", a+"/commit-statuses?commit="+sha, nil)},
			{method: "POST", path: "/api/agents/:id/commit-statuses", need: auth.Operator, agent: true, ok: 201,
				call: json("POST", a+"/commit-statuses", map[string]any{"commit": sha, "context": "svc/evals", "state": "success"})},
			{method: "GET", path: "/api/agents/:id/sessions", need: auth.Observer, agent: true, ok: 200, call: json("GET", a+"/sessions", nil)},
			{method: "GET", path: "/api/agents/:id/feedback", need: auth.Observer, agent: true, ok: 200, call: json("GET", a+"/feedback", nil)},
			{method: "GET", path: "/api/agents/:id/runs", need: auth.Observer, agent: true, ok: 200, call: json("GET", a+"/runs?userId=u1&screen=home", nil)},
			{method: "GET", path: "/api/agents/:id/runs/:runId", need: auth.Observer, agent: true, ok: 200, call: json("GET", a+"/runs/run_authz", nil)},
			{method: "POST", path: "/api/agents/:id/tokens", need: auth.Operator, agent: true, ok: 201,
				call: json("POST", a+"/tokens", map[string]any{"ttl": 600})},
		}
		rows = append(rows, deploymentRows(t, h, agentA)...)

		// Every route is in the table, and nothing else.
		var registered, tested []string
		for _, r := range h.api.Routes() {
			registered = append(registered, r.Method+" "+r.Path)
		}
		for _, row := range rows {
			tested = append(tested, row.method+" "+row.path)
		}
		sort.Strings(registered)
		sort.Strings(tested)
		if strings.Join(registered, "\n") != strings.Join(tested, "\n") {
			t.Errorf("routes registered:\n%s\nroutes in this table:\n%s", strings.Join(registered, "\n"), strings.Join(tested, "\n"))
		}

		for _, row := range rows {
			for _, c := range callers {
				want := expectedStatus(row, c)
				r := row.call()
				r.token = c.token
				rec := h.do(r)
				if rec.Code != want {
					t.Errorf("%s %s as %s = %d %s, want %d", row.method, row.path, c.name, rec.Code, rec.Body.String(), want)
					continue
				}
				if want >= 400 {
					wantCode := map[int]string{401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND"}[want]
					if e := errorOf(t, rec); e.Error.Code != wantCode {
						t.Errorf("%s %s as %s: code %s, want %s", row.method, row.path, c.name, e.Error.Code, wantCode)
					}
					if want == 401 && rec.Header().Get("WWW-Authenticate") == "" {
						t.Errorf("%s %s as %s: 401 without WWW-Authenticate", row.method, row.path, c.name)
					}
				}
			}
		}

		// An agent that does not exist is 404 to an unbound token, and 403 (no probing) to a bound one.
		for _, row := range rows {
			if !row.agent {
				continue
			}
			r := row.call()
			r.path = strings.Replace(r.path, agentA, "anosuchagent", 1)
			r.token = h.admin
			if rec := h.do(r); rec.Code != http.StatusNotFound || errorOf(t, rec).Error.Code != "NOT_FOUND" {
				t.Errorf("%s %s on a missing agent = %d %s, want 404 NOT_FOUND", r.method, r.path, rec.Code, rec.Body.String())
			}
			r.token = thisAdmin
			if rec := h.do(r); rec.Code != http.StatusForbidden {
				t.Errorf("%s %s on a missing agent with a bound token = %d, want 403", r.method, r.path, rec.Code)
			}
		}
	})
}

// expectedStatus is the status a caller gets on a row: 403 for an ak_ key, 401 for anything else
// but a valid pk_ token,
// 403 for a kind below the route's need or a binding to another agent, else success.
func expectedStatus(row routeCase, c caller) int {
	switch {
	case row.need == "":
		return row.ok
	case c.name == "ak_":
		return http.StatusForbidden // an agent key never calls the platform (CONTRACT §8)
	case c.kind == "":
		return http.StatusUnauthorized
	case !c.kind.Allows(row.need):
		return http.StatusForbidden
	case row.boundOther != 0 && c.bound == "other":
		return row.boundOther
	case row.agent && c.bound == "other":
		return http.StatusForbidden
	case row.method == "POST" && row.path == "/api/agents" && c.bound != "":
		return http.StatusForbidden // a bound token cannot create agents
	}
	return row.ok
}
