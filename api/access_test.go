package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
)

// TestAccessSettingsRoutes: GET is 404 until a PUT; a bad document is 400 naming its field and
// stores nothing; a good one is answered normalized and read back as sent.
func TestAccessSettingsRoutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		id := h.createAgent("signin")
		path := "/api/agents/" + id + "/access"

		if rec := h.do(request{method: "GET", path: path, token: h.admin}); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "NOT_FOUND") {
			t.Fatalf("GET access before any PUT = %d %s, want 404 NOT_FOUND", rec.Code, rec.Body.String())
		}

		bad := []struct {
			name, body, field string
		}{
			{"unknown field", `{"oidc":{"issuer":"https://idp.example","clientId":"c","clientSecrett":"x"},"allow":{"domains":["example.com"]}}`, "oidc.clientSecrett"},
			{"no oidc", `{"allow":{"domains":["example.com"]}}`, "oidc"},
			{"http issuer", `{"oidc":{"issuer":"http://idp.example","clientId":"c"},"allow":{"domains":["example.com"]}}`, "oidc.issuer"},
			{"secret not env", `{"oidc":{"issuer":"https://idp.example","clientId":"c","clientSecret":"plain"},"allow":{"domains":["example.com"]}}`, "oidc.clientSecret"},
			{"admits nobody", `{"oidc":{"issuer":"https://idp.example","clientId":"c"},"allow":{}}`, "allow"},
			{"bad e-mail", `{"oidc":{"issuer":"https://idp.example","clientId":"c"},"allow":{"emails":["nobody"]}}`, "allow.emails[0]"},
			{"wrong type", `{"oidc":{"issuer":"https://idp.example","clientId":"c"},"allow":{"domains":"example.com"}}`, "allow.domains"},
		}
		for _, tc := range bad {
			t.Run(tc.name, func(t *testing.T) {
				rec := h.do(request{method: "PUT", path: path, token: h.admin, body: tc.body})
				var got struct {
					Error struct{ Code, Message, Field string } `json:"error"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
					t.Fatal(err)
				}
				if rec.Code != http.StatusBadRequest || got.Error.Code != "INVALID_REQUEST" || got.Error.Field != tc.field || !strings.Contains(got.Error.Message, tc.field) {
					t.Errorf("PUT %s = %d %s, want 400 INVALID_REQUEST naming %s", tc.body, rec.Code, rec.Body.String(), tc.field)
				}
			})
		}
		if rec := h.do(request{method: "GET", path: path, token: h.admin}); rec.Code != http.StatusNotFound {
			t.Fatalf("GET access after refused PUTs = %d, want 404", rec.Code)
		}

		doc := `{"oidc": {"issuer": "https://idp.example", "clientId": "web", "clientSecret": "env:IDP_SECRET"},
			"allow": {"domains": ["example.com"]}, "collaborators": ["ann@other.example"]}`
		var put map[string]any
		h.call("PUT", path, h.admin, doc, http.StatusOK, &put)
		if oidc, _ := put["oidc"].(map[string]any); oidc["userClaim"] != "sub" || oidc["emailClaim"] != "email" || oidc["clientSecret"] != "env:IDP_SECRET" {
			t.Errorf("PUT access answered %v, want the settings with the default claims", put)
		}
		rec := h.do(request{method: "GET", path: path, token: h.admin})
		want := `{"oidc":{"issuer":"https://idp.example","clientId":"web","clientSecret":"env:IDP_SECRET"},"allow":{"domains":["example.com"]},"collaborators":["ann@other.example"]}`
		if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
			t.Errorf("GET access = %d %s, want 200 %s", rec.Code, rec.Body.String(), want)
		}
	})
}
