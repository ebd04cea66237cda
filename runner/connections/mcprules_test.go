package connections

import (
	"testing"

	"svc/agent"
)

func TestToolRulesDecide(t *testing.T) {
	tests := []struct {
		name           string
		policy, access map[string]string
		tool           string
		readOnly       bool
		want, rule     string
	}{
		{"default read", nil, nil, "get", true, AccessAllow, "default for a tool the server marks readOnlyHint"},
		{"default write", nil, nil, "put", false, AccessConfirm, "default for a tool the server does not mark readOnlyHint"},
		{"named beats star", map[string]string{"put": "allow", "*": "deny"}, nil, "put", false, AccessAllow, `policy.json rule "tools": "put"`},
		{"star", map[string]string{"put": "allow", "*": "deny"}, nil, "get", true, AccessDeny, `policy.json rule "tools": "*"`},
		{"stricter file wins", map[string]string{"put": "allow"}, map[string]string{"*": "confirm"}, "put", false, AccessConfirm, `access.json rule "tools": "*"`},
		{"access deny", map[string]string{"*": "confirm"}, map[string]string{"wipe": "deny"}, "wipe", false, AccessDeny, `access.json rule "tools": "wipe"`},
		{"rule over readOnly default", map[string]string{"get": "confirm"}, nil, "get", true, AccessConfirm, `policy.json rule "tools": "get"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := &agent.Connection{Name: "m", Spec: agent.ConnectionSpec{Format: agent.FormatMCP}}
			if tc.policy != nil {
				def.Policy = &agent.Policy{Tools: tc.policy}
			}
			if tc.access != nil {
				def.Access = &agent.Access{Tools: tc.access}
			}
			tr, err := compileToolRules(def)
			if err != nil {
				t.Fatal(err)
			}
			if v := tr.decide(tc.tool, tc.readOnly); v.action != tc.want || v.rule != tc.rule {
				t.Errorf("decide = %+v, want %s by %s", v, tc.want, tc.rule)
			}
		})
	}
}
