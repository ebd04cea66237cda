package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
)

// TestNoTokenOrSecretLeaks runs every route with every kind of credential, good and bad
// requests, keeps all log output and every response (headers and body), and then looks for each
// token and secret value: a minted token may appear only in the one response that minted it, a
// secret value nowhere.
func TestNoTokenOrSecretLeaks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		shownOnce := map[string]bool{h.admin: false} // token values; true once their minting response is seen
		var secrets []string

		mint := func(path string, body any, field string) string {
			var out map[string]any
			h.call(http.MethodPost, path, h.admin, body, http.StatusCreated, &out)
			v, _ := out[field].(string)
			if v == "" {
				t.Fatalf("POST %s answered no %s", path, field)
			}
			shownOnce[v] = true
			return v
		}

		agent := h.createAgent("Leaky")
		other := h.createAgent("Other")
		base := "/api/agents/" + agent
		observer := mint("/api/tokens", map[string]any{"name": "o", "kind": "observer"}, "token")
		operator := mint("/api/tokens", map[string]any{"name": "op", "kind": "operator", "agentId": agent}, "token")
		admin2 := mint("/api/tokens", map[string]any{"name": "a", "kind": "admin"}, "token")
		boundOther := mint("/api/tokens", map[string]any{"name": "b", "kind": "operator", "agentId": other}, "token")
		apiKey := mint(base+"/api-keys", map[string]any{"name": "site"}, "key")
		runtime := mint(base+"/tokens", map[string]any{"ttl": 120, "user_id": "u1", "scope_id": "s1"}, "token")
		revokedTok, revoked := h.mintToken(auth.Operator, "")
		shownOnce[revoked] = false
		if err := h.tokens.Revoke(ctx, revokedTok.ID); err != nil {
			t.Fatal(err)
		}
		unknown := "pk_" + strings.Repeat("u", 52)
		shownOnce[unknown] = false

		secretValue := "sv-" + strings.Repeat("9", 20)
		webhookSecret := "wh-" + strings.Repeat("8", 20)
		typedSecret := "424242424242"
		secrets = append(secrets, secretValue, webhookSecret, typedSecret)

		// Secrets, good and bad.
		h.call("PUT", base+"/secrets/API_KEY", h.admin, map[string]any{"value": secretValue}, http.StatusNoContent, nil)
		h.call("PUT", base+"/secrets/bad-name", h.admin, map[string]any{"value": secretValue}, http.StatusBadRequest, nil)
		h.call("PUT", base+"/secrets/API_KEY", h.admin, `{"value":`+typedSecret+`}`, http.StatusBadRequest, nil)
		h.call("PUT", base+"/secrets/API_KEY", h.admin, map[string]any{"value": secretValue, "extra": 1}, http.StatusBadRequest, nil)
		h.call("PUT", base+"/secrets/API_KEY", observer, map[string]any{"value": secretValue}, http.StatusForbidden, nil)
		h.call("PUT", "/api/agents/"+other+"/secrets/API_KEY", operator, map[string]any{"value": secretValue}, http.StatusForbidden, nil)
		// Source with a webhook secret, and reads of it.
		h.call("PUT", base+"/source", h.admin, map[string]any{"type": "git", "url": "https://github.com/acme/leaky.git", "webhookSecret": webhookSecret, "credentials": "env:GIT_TOKEN"}, http.StatusOK, nil)
		h.call("PUT", base+"/source", h.admin, map[string]any{"type": "hosted", "webhookSecret": webhookSecret}, http.StatusBadRequest, nil)
		h.call("PUT", base+"/source", h.admin, map[string]any{"type": "git", "url": "https://github.com/acme/leaky.git", "webhookSecret": webhookSecret}, http.StatusOK, nil)

		// Every credential on every route, including the ones that must fail.
		for _, tok := range []string{"", observer, operator, admin2, boundOther, apiKey, runtime, revoked, unknown, h.admin} {
			for _, r := range []request{
				{method: "GET", path: "/api/agents"},
				{method: "GET", path: base},
				{method: "GET", path: base + "/deploy-settings"},
				{method: "PUT", path: base + "/deploy-settings", body: map[string]any{"autoDeploy": true}},
				{method: "POST", path: base + "/commit-statuses", body: map[string]any{"commit": strings.Repeat("d", 40), "state": "success"}},
				{method: "POST", path: base + "/source-versions", body: map[string]any{"files": fixtureFiles(t, "hello")}},
				{method: "PUT", path: base + "/secrets/OTHER", body: map[string]any{"value": secretValue}},
				{method: "GET", path: "/api/agents/anosuchagent"},
				{method: "GET", path: "/nowhere"},
				{method: "GET", path: "/health"},
			} {
				r.token = tok
				h.do(r)
			}
		}
		// Tokens sent in other headers or malformed must not be echoed either.
		h.do(request{method: "GET", path: "/api/agents", header: map[string]string{"Authorization": "Token " + admin2}})
		h.do(request{method: "GET", path: "/api/agents", header: map[string]string{"Authorization": "Bearer " + runtime + " extra"}})
		h.do(request{method: "GET", path: "/api/agents", header: map[string]string{"X-Request-Id": admin2}})
		h.do(request{method: "GET", path: "/api/agents", header: map[string]string{"X-Request-Id": apiKey}})
		h.do(request{method: "GET", path: "/api/agents", header: map[string]string{"X-Request-Id": runtime}})
		h.do(request{method: "GET", path: "/api/agents?token=" + admin2})
		h.do(request{method: "GET", path: "/metrics"})
		h.do(request{method: "GET", path: "/api/openapi.json"})
		h.call("DELETE", "/api/tokens/"+revokedTok.ID, h.admin, nil, http.StatusNotFound, nil)

		logs := h.logs.String()
		if !strings.Contains(logs, `"msg":"request"`) {
			t.Fatal("no access log was captured")
		}
		for _, v := range append(secrets, keys(shownOnce)...) {
			if strings.Contains(logs, v) {
				t.Errorf("the log contains %s", describe(v))
			}
		}
		for _, v := range secrets {
			for _, b := range h.bodies {
				if strings.Contains(b, v) {
					t.Errorf("a response contains secret %s: %.300s", describe(v), b)
				}
			}
		}
		for v, minted := range shownOnce {
			n := 0
			for _, b := range h.bodies {
				n += strings.Count(b, v)
			}
			want := 0
			if minted {
				want = 1
			}
			if n != want {
				t.Errorf("%s appears in %d responses, want %d", describe(v), n, want)
			}
		}
	})
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// describe names a credential without printing it whole.
func describe(v string) string {
	if len(v) > 8 {
		return fmt.Sprintf("%q... (%d chars)", v[:6], len(v))
	}
	return fmt.Sprintf("%q", v)
}
