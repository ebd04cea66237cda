package connections

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMostSpecific is the definition of "most specific first" as a table: for each call, the
// rule of keys that applies.
func TestMostSpecific(t *testing.T) {
	keys := []string{
		"*",
		"GET /incidents",
		"GET /incidents/{id}",
		"GET /incidents/open",
		"GET /incidents/{id}/updates",
		"GET /incidents/open/{page}",
		"GET /{kind}/open",
		"GET /{kind}/{id}",
		"POST /incidents/{id}",
		"GET /tenants/{{context.tenant}}/tickets",
		"GET /tenants/{t}/tickets",
		"GET /tenants/acme/tickets",
		"GET /",
		"DELETE /incidents/{id}",
	}
	rs, err := compileRules("policy.json", keys)
	if err != nil {
		t.Fatal(err)
	}
	ctx := map[string]string{"tenant": "globex"}
	cases := []struct {
		method, path, want string
	}{
		{"GET", "/incidents", "GET /incidents"},
		{"GET", "/incidents/", "GET /incidents"},          // one trailing slash is not significant
		{"GET", "/incidents/open", "GET /incidents/open"}, // literal beats {id}
		{"GET", "/incidents/42", "GET /incidents/{id}"},
		{"GET", "/incidents/42/updates", "GET /incidents/{id}/updates"},
		{"GET", "/incidents/open/2", "GET /incidents/open/{page}"},
		{"GET", "/alerts/open", "GET /{kind}/open"},      // {kind}/open: the second literal decides
		{"GET", "/incidents/x/y/z", "*"},                 // no pattern of 4 segments
		{"GET", "/alerts/7", "GET /{kind}/{id}"},         // first segment literal beats {kind}
		{"POST", "/incidents/1", "POST /incidents/{id}"}, // method-specific
		{"PUT", "/incidents/1", "*"},                     // no PUT rule: the fallback
		{"DELETE", "/incidents/1", "DELETE /incidents/{id}"},
		{"GET", "/tenants/acme/tickets", "GET /tenants/acme/tickets"},                 // literal beats context
		{"GET", "/tenants/globex/tickets", "GET /tenants/{{context.tenant}}/tickets"}, // context beats {t}
		{"GET", "/tenants/initech/tickets", "GET /tenants/{t}/tickets"},
		{"GET", "/", "GET /"},
		{"HEAD", "/incidents", "*"}, // HEAD matches HEAD rules only
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			rp, err := parsePath(c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := rs.find(c.method, rp.segs, ctx)
			if r == nil {
				t.Fatal("no rule matched")
			}
			if r.key != c.want {
				t.Errorf("rule = %q, want %q", r.key, c.want)
			}
		})
	}
}

// TestRuleOrder checks the total order moreSpecific gives (the order Describe lists).
func TestRuleOrder(t *testing.T) {
	rs, err := compileRules("access.json", []string{"*", "GET /{a}/{b}", "GET /x/{b}", "GET /{a}/y", "GET /x/y", "GET /x", "POST /x/y", "GET /x/{{context.k}}"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs.rules {
		got = append(got, r.key)
	}
	want := []string{"GET /x/y", "POST /x/y", "GET /x/{{context.k}}", "GET /x/{b}", "GET /x", "GET /{a}/y", "GET /{a}/{b}", "*"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("order (-want +got):\n%s", d)
	}
}

func TestCompileRulesErrors(t *testing.T) {
	cases := []struct {
		keys []string
		want string
	}{
		{[]string{"GET /a/{id}", "GET /a/{name}"}, `access.json: endpoints "GET /a/{id}" and "GET /a/{name}" match the same calls`},
		{[]string{"GET /a/", "GET /a"}, `match the same calls`},
		{[]string{"FETCH /a"}, `endpoint "FETCH /a" must be`},
		{[]string{"GET a"}, `endpoint "GET a" must be`},
		{[]string{"GET /a//b"}, `empty path segment`},
		{[]string{"GET /a/{{user.id}}"}, `is not a {{context.KEY}} template`},
	}
	for _, c := range cases {
		_, err := compileRules("access.json", c.keys)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("compileRules(%q) = %v, want an error with %q", c.keys, err, c.want)
		}
	}
}

func TestParamMatchesOneNonEmptySegment(t *testing.T) {
	rs, err := compileRules("policy.json", []string{"GET /a/{id}"})
	if err != nil {
		t.Fatal(err)
	}
	for _, segs := range [][]string{{"a"}, {"a", "1", "2"}, {"a", ""}} {
		if r := rs.find("GET", segs, nil); r != nil {
			t.Errorf("find(%q) = %q, want no match", segs, r.key)
		}
	}
	if r := rs.find("GET", []string{"a", "x/y"}, nil); r == nil {
		t.Error(`{id} does not match the one decoded segment "x/y" (sent as x%2Fy)`)
	}
}
