package connections

import (
	"fmt"
	"maps"
	"slices"

	"svc/agent"
)

// toolRules are the "tools" rules of an mcp connection's policy.json and access.json.
type toolRules struct {
	policy map[string]string // by tool name or "*"
	access map[string]string
}

// toolVerdict is what the rules say about one tool.
type toolVerdict struct {
	action string // AccessAllow | AccessConfirm | AccessDeny
	rule   string // the rule that decided, for people: `policy.json "tools": "search"`, or the default
}

func compileToolRules(def *agent.Connection) (*toolRules, error) {
	tr := &toolRules{}
	if def.Policy != nil {
		if len(def.Policy.Endpoints) > 0 {
			return nil, fmt.Errorf("policy.json: an mcp connection has \"tools\" rules, not \"endpoints\"")
		}
		tr.policy = def.Policy.Tools
	}
	if def.Access != nil {
		if len(def.Access.Endpoints) > 0 {
			return nil, fmt.Errorf("access.json: an mcp connection has \"tools\" rules, not \"endpoints\"")
		}
		tr.access = def.Access.Tools
	}
	for file, m := range map[string]map[string]string{"policy.json": tr.policy, "access.json": tr.access} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			switch m[k] {
			case AccessAllow, AccessConfirm, AccessDeny:
			default:
				return nil, fmt.Errorf("%s: tools.%s must be one of allow, confirm, deny; got %q", file, k, m[k])
			}
		}
	}
	return tr, nil
}

// strictness orders the actions: deny over confirm over allow.
func strictness(action string) int {
	switch action {
	case AccessDeny:
		return 2
	case AccessConfirm:
		return 1
	}
	return 0
}

// decide rules the tool called name (the server's name). Each file's rule is its entry for
// the name, else its "*"; when both files have one the stricter applies (deny, then confirm);
// when neither has one, a tool the server annotates readOnlyHint is allowed and any other
// asks the user first.
func (tr *toolRules) decide(name string, readOnly bool) toolVerdict {
	var v toolVerdict
	found := false
	for _, f := range []struct {
		file string
		m    map[string]string
	}{{"policy.json", tr.policy}, {"access.json", tr.access}} {
		key := name
		action, ok := f.m[key]
		if !ok {
			key = "*"
			action, ok = f.m[key]
		}
		if !ok {
			continue
		}
		if !found || strictness(action) > strictness(v.action) {
			v = toolVerdict{action: action, rule: fmt.Sprintf("%s rule \"tools\": %q", f.file, key)}
		}
		found = true
	}
	switch {
	case found:
	case readOnly:
		v = toolVerdict{action: AccessAllow, rule: "default for a tool the server marks readOnlyHint"}
	default:
		v = toolVerdict{action: AccessConfirm, rule: "default for a tool the server does not mark readOnlyHint"}
	}
	return v
}
