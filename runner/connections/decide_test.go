package connections

import (
	"errors"
	"strings"
	"testing"

	"svc/agent"
)

// TestDecide is the rules table: method × path × policy and access rules → allowed, needs
// confirmation, or refused (with the words the error must contain).
func TestDecide(t *testing.T) {
	policy := &agent.Policy{Endpoints: map[string]agent.EndpointRule{
		"GET /incidents":                 {Confirm: "never", Reason: "List open incidents"},
		"GET /incidents/{id}":            {Confirm: "never"},
		"POST /incidents/{id}/subscribe": {Confirm: "always", Reason: "Subscribe"},
		"PATCH /incidents/{id}":          {Confirm: "write"},
		"GET /reports/{id}":              {Confirm: "always"},
		"GET /exports/{id}":              {Confirm: "write"},
		"PUT /incidents/{id}/notes":      {Confirm: "never"},
		"*":                              {Confirm: "never"},
	}}
	access := &agent.Access{Endpoints: map[string]string{
		"GET /incidents/{id}":       "allow",
		"GET /incidents/secret":     "deny",
		"DELETE /incidents/{id}":    "deny",
		"POST /incidents/{id}/tags": "confirm",
		"PUT /incidents/{id}/notes": "allow",
		"GET /admin":                "confirm",
		"*":                         "allow",
	}}
	cases := []struct {
		name         string
		policy       *agent.Policy
		access       *agent.Access
		method, path string
		confirm      bool
		refused      string // "" when allowed
	}{
		{name: "policy never", policy: policy, method: "GET", path: "/incidents"},
		{name: "policy always on a write", policy: policy, method: "POST", path: "/incidents/4/subscribe", confirm: true},
		{name: "policy write on a write", policy: policy, method: "PATCH", path: "/incidents/4", confirm: true},
		{name: "policy always on a read", policy: policy, method: "GET", path: "/reports/1", confirm: true},
		{name: "policy write on a read", policy: policy, method: "GET", path: "/exports/1"},
		{name: "policy fallback read", policy: policy, method: "GET", path: "/anything/else"},
		{name: "policy fallback refuses writes", policy: policy, method: "POST", path: "/anything", refused: `only the policy.json rule "*" matches it`},
		{name: "policy unlisted read", policy: &agent.Policy{Endpoints: map[string]agent.EndpointRule{"GET /a": {}}}, method: "GET", path: "/b"},
		{name: "policy unlisted write", policy: &agent.Policy{Endpoints: map[string]agent.EndpointRule{"GET /a": {}}}, method: "DELETE", path: "/b", refused: "no endpoint rule matches it"},
		{name: "no rules read", method: "GET", path: "/x"},
		{name: "no rules write", method: "PUT", path: "/x", refused: "writes need an endpoint rule"},
		{name: "access allow", access: access, method: "GET", path: "/incidents/4"},
		{name: "access deny literal beats param", access: access, method: "GET", path: "/incidents/secret", refused: `access.json rule "GET /incidents/secret" denies GET /incidents/secret`},
		{name: "access deny on encoded literal", access: access, method: "GET", path: "/incidents/%73ecret", refused: "denies"},
		{name: "access deny trailing slash", access: access, method: "GET", path: "/incidents/secret/", refused: "denies"},
		{name: "access deny write", access: access, method: "DELETE", path: "/incidents/4", refused: `rule "DELETE /incidents/{id}" denies`},
		{name: "access confirm write", access: access, method: "POST", path: "/incidents/4/tags", confirm: true},
		{name: "access confirm read", access: access, method: "GET", path: "/admin", confirm: true},
		{name: "access fallback allows reads", access: access, method: "GET", path: "/other"},
		{name: "access fallback refuses writes", access: access, method: "POST", path: "/other", refused: `only the access.json rule "*" matches it`},
		{name: "access allow-list without fallback", access: &agent.Access{Endpoints: map[string]string{"GET /a": "allow"}}, method: "GET", path: "/b", refused: `no access.json endpoint rule matches GET /b`},
		{name: "both: policy explicit write, access fallback", policy: policy, access: access, method: "PATCH", path: "/incidents/4", confirm: true},
		{name: "both: access explicit write, policy fallback", policy: policy, access: access, method: "POST", path: "/incidents/4/tags", confirm: true},
		{name: "both: deny wins over policy never", policy: policy, access: access, method: "DELETE", path: "/incidents/4", refused: "denies"},
		{name: "both: allow and never", policy: policy, access: access, method: "PUT", path: "/incidents/4/notes"},
		{name: "both: access allow, policy always", policy: policy, access: access, method: "POST", path: "/incidents/4/subscribe", confirm: true},
		{name: "both: write only the fallbacks match", policy: policy, access: access, method: "PUT", path: "/x", refused: "refuses writes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := compileConnRules(&agent.Connection{Name: "status", Policy: c.policy, Access: c.access})
			if err != nil {
				t.Fatal(err)
			}
			rp, err := parsePath(c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			v, err := rs.decide(c.method, rp.segs, c.path, nil)
			if c.refused != "" {
				if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("decide = %v, want ErrDenied with %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if v.confirm != c.confirm {
				t.Errorf("confirm = %v (%s), want %v", v.confirm, v.confirmBy, c.confirm)
			}
			if v.confirm && v.confirmBy == "" {
				t.Error("confirm without the rule that asks")
			}
		})
	}
}

func TestCompileConnRulesNamesTheFile(t *testing.T) {
	_, err := compileConnRules(&agent.Connection{Policy: &agent.Policy{Endpoints: map[string]agent.EndpointRule{"GET /a": {Confirm: "sometimes"}}}})
	if err == nil || !strings.Contains(err.Error(), "policy.json: endpoints.GET /a.confirm") {
		t.Errorf("err = %v", err)
	}
	_, err = compileConnRules(&agent.Connection{Access: &agent.Access{Endpoints: map[string]string{"GET /a": "maybe"}}})
	if err == nil || !strings.Contains(err.Error(), "access.json: endpoints.GET /a") {
		t.Errorf("err = %v", err)
	}
}
