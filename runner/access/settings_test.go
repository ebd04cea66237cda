package access_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/access"
)

func TestParseSettingsDefaults(t *testing.T) {
	s, err := access.ParseSettings([]byte(`{
		"oidc": {"issuer": "https://idp.example.com", "clientId": "c1", "clientSecret": "env:IDP_SECRET"},
		"allow": {"domains": ["example.com"]}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &access.OIDCSettings{Issuer: "https://idp.example.com", ClientID: "c1", ClientSecret: "env:IDP_SECRET", UserClaim: "sub", EmailClaim: "email"}
	if diff := cmp.Diff(want, s.OIDC); diff != "" {
		t.Errorf("oidc (-want +got):\n%s", diff)
	}
	if got := s.ClientSecretEnv(); got != "IDP_SECRET" {
		t.Errorf("ClientSecretEnv() = %q, want IDP_SECRET", got)
	}
}

func TestParseSettingsErrorsNameTheField(t *testing.T) {
	const okOIDC = `"oidc": {"issuer": "https://idp.example.com", "clientId": "c1"}`
	tests := []struct {
		name, body, field string
	}{
		{"unknown top-level field", `{` + okOIDC + `, "allow": {"domains": ["example.com"]}, "colaborators": []}`, "colaborators"},
		{"unknown oidc field", `{"oidc": {"issuer": "https://idp.example.com", "clientId": "c1", "clientSecrets": "x"}, "allow": {"domains": ["example.com"]}}`, "oidc.clientSecrets"},
		{"unknown allow field", `{` + okOIDC + `, "allow": {"domain": ["example.com"]}}`, "allow.domain"},
		{"wrong type", `{"oidc": {"issuer": "https://idp.example.com", "clientId": "c1", "audiences": "c1"}, "allow": {"domains": ["example.com"]}}`, "oidc.audiences"},
		{"no oidc", `{"allow": {"domains": ["example.com"]}}`, "oidc"},
		{"no issuer", `{"oidc": {"clientId": "c1"}, "allow": {"domains": ["example.com"]}}`, "oidc.issuer"},
		{"http issuer", `{"oidc": {"issuer": "http://idp.example.com", "clientId": "c1"}, "allow": {"domains": ["example.com"]}}`, "oidc.issuer"},
		{"issuer with a query", `{"oidc": {"issuer": "https://idp.example.com/?x=1", "clientId": "c1"}, "allow": {"domains": ["example.com"]}}`, "oidc.issuer"},
		{"no client id", `{"oidc": {"issuer": "https://idp.example.com"}, "allow": {"domains": ["example.com"]}}`, "oidc.clientId"},
		{"secret in clear", `{"oidc": {"issuer": "https://idp.example.com", "clientId": "c1", "clientSecret": "hunter2"}, "allow": {"domains": ["example.com"]}}`, "oidc.clientSecret"},
		{"empty audience", `{"oidc": {"issuer": "https://idp.example.com", "clientId": "c1", "audiences": ["a", ""]}, "allow": {"domains": ["example.com"]}}`, "oidc.audiences[1]"},
		{"bad e-mail", `{` + okOIDC + `, "allow": {"emails": ["ada@example.com", "ada"]}}`, "allow.emails[1]"},
		{"bad domain", `{` + okOIDC + `, "allow": {"domains": ["@example.com"]}}`, "allow.domains[0]"},
		{"empty group", `{` + okOIDC + `, "allow": {"groups": [""]}}`, "allow.groups[0]"},
		{"empty org", `{` + okOIDC + `, "allow": {"orgs": [" "]}}`, "allow.orgs[0]"},
		{"bad collaborator", `{` + okOIDC + `, "collaborators": ["nobody"]}`, "collaborators[0]"},
		{"admits nobody", `{` + okOIDC + `}`, "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := access.ParseSettings([]byte(tt.body))
			var fe *access.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("ParseSettings = %v, want a *FieldError for %s", err, tt.field)
			}
			if fe.Field != tt.field || !strings.HasPrefix(err.Error(), tt.field+" ") {
				t.Errorf("ParseSettings = %q (field %q), want the field %q first", err, fe.Field, tt.field)
			}
		})
	}
}

func TestLoopbackIssuersMayUseHTTP(t *testing.T) {
	for _, issuer := range []string{"http://127.0.0.1:8080", "http://localhost:9000/realms/x", "http://[::1]:1234"} {
		s := &access.Settings{OIDC: &access.OIDCSettings{Issuer: issuer, ClientID: "c"}, Allow: access.AllowRules{Orgs: []string{"o"}}}
		if err := s.Validate(); err != nil {
			t.Errorf("issuer %s: %v", issuer, err)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	s := &access.Settings{OIDC: &access.OIDCSettings{}, Allow: access.AllowRules{Emails: []string{"x"}}}
	err := s.Validate()
	for _, field := range []string{"oidc.issuer", "oidc.clientId", "allow.emails[0]"} {
		if err == nil || !strings.Contains(err.Error(), field+" ") {
			t.Errorf("Validate() = %v, want it to name %s", err, field)
		}
	}
}

func TestAdmits(t *testing.T) {
	s := &access.Settings{
		Allow: access.AllowRules{
			Emails:  []string{"Ada@Lovelace.org"},
			Domains: []string{"Example.com"},
			Groups:  []string{"agents"},
			Orgs:    []string{"org-1"},
		},
		Collaborators: []string{"guest@elsewhere.org"},
	}
	tests := []struct {
		name string
		user access.User
		want bool
	}{
		{"e-mail, any case", access.User{ID: "1", Email: "ada@lovelace.ORG", EmailVerified: true}, true},
		{"e-mail not verified", access.User{ID: "1", Email: "ada@lovelace.org"}, false},
		{"domain", access.User{ID: "2", Email: "bob@EXAMPLE.com", EmailVerified: true}, true},
		{"subdomain is another domain", access.User{ID: "3", Email: "eve@evil.example.com", EmailVerified: true}, false},
		{"domain as a suffix", access.User{ID: "3", Email: "eve@notexample.com", EmailVerified: true}, false},
		{"unverified domain", access.User{ID: "3", Email: "eve@example.com"}, false},
		{"group", access.User{ID: "4", Groups: []string{"staff", "agents"}}, true},
		{"group is exact", access.User{ID: "4", Groups: []string{"Agents"}}, false},
		{"org", access.User{ID: "5", OrgID: "org-1"}, true},
		{"other org", access.User{ID: "5", OrgID: "org-2"}, false},
		{"collaborator", access.User{ID: "6", Email: "Guest@elsewhere.org", EmailVerified: true}, true},
		{"nobody", access.User{ID: "7", Email: "x@y.z", EmailVerified: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Admits(tt.user); got != tt.want {
				t.Errorf("Admits(%+v) = %v, want %v", tt.user, got, tt.want)
			}
			if got := s.ShowsEmail(tt.user); got != (tt.want && tt.user.Email != "") {
				t.Errorf("ShowsEmail(%+v) = %v", tt.user, got)
			}
		})
	}
}
