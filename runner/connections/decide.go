package connections

import (
	"errors"
	"fmt"

	"svc/agent"
)

// ErrDenied is wrapped by the errors of calls an endpoint rule refuses: an access.json deny,
// a write that only the "*" fallback matches, or a call access.json does not list.
var ErrDenied = errors.New("connections: refused by an endpoint rule")

// Access rule values of access.json.
const (
	AccessAllow   = "allow"
	AccessConfirm = "confirm"
	AccessDeny    = "deny"
)

// Policy confirm values of policy.json.
const (
	ConfirmNever  = "never"
	ConfirmAlways = "always"
	ConfirmWrite  = "write" // mutating methods only
)

// mutating reports whether method changes state on the server and so needs intent write.
func mutating(method string) bool {
	switch method {
	case "POST", "PUT", "PATCH", "DELETE":
		return true
	}
	return false
}

// rules are the compiled endpoint rules of one connection.
type rules struct {
	policy *ruleSet                      // nil without policy.json endpoints
	access *ruleSet                      // nil without access.json endpoints
	pRule  map[string]agent.EndpointRule // policy rule by key
	aRule  map[string]string             // access value by key
}

func compileConnRules(c *agent.Connection) (*rules, error) {
	rs := &rules{}
	if c.Policy != nil && len(c.Policy.Endpoints) > 0 {
		keys := make([]string, 0, len(c.Policy.Endpoints))
		for k, r := range c.Policy.Endpoints {
			switch r.Confirm {
			case "", ConfirmNever, ConfirmAlways, ConfirmWrite:
			default:
				return nil, fmt.Errorf("policy.json: endpoints.%s.confirm must be one of never, always, write; got %q", k, r.Confirm)
			}
			keys = append(keys, k)
		}
		set, err := compileRules("policy.json", keys)
		if err != nil {
			return nil, err
		}
		rs.policy, rs.pRule = set, c.Policy.Endpoints
	}
	if c.Access != nil && len(c.Access.Endpoints) > 0 {
		keys := make([]string, 0, len(c.Access.Endpoints))
		for k, v := range c.Access.Endpoints {
			switch v {
			case AccessAllow, AccessConfirm, AccessDeny:
			default:
				return nil, fmt.Errorf("access.json: endpoints.%s must be one of allow, confirm, deny; got %q", k, v)
			}
			keys = append(keys, k)
		}
		set, err := compileRules("access.json", keys)
		if err != nil {
			return nil, err
		}
		rs.access, rs.aRule = set, c.Access.Endpoints
	}
	return rs, nil
}

// verdict is what the rules say about one call that they do not refuse.
type verdict struct {
	policy *rule // the matched policy.json rule, or nil
	access *rule // the matched access.json rule, or nil
	// confirm says the call needs the user's approval; confirmBy names the rule that asks.
	confirm   bool
	confirmBy string
	reason    string // the policy rule's reason, or ""
}

// decide applies the rules to a call of method to segs (decoded path segments); display is the
// path as shown in messages. How the two files combine:
//
//  1. access.json: the most specific matching rule applies. deny refuses the call. When the
//     file has endpoint rules but none matches (no "*"), the call is refused: access.json is
//     an allow-list once it lists endpoints.
//  2. policy.json: the most specific matching rule applies; a call it does not match is
//     governed by access.json alone (returns and reason are guidance, not a list of reachable
//     paths).
//  3. A mutating call (POST, PUT, PATCH, DELETE) needs an explicit endpoint rule, other than
//     "*", in either file: the fallback refuses writes, and so does a connection without rules.
//  4. The call needs the user's approval when the policy rule says confirm "always", or
//     "write" and the method is mutating, or the access rule says "confirm".
func (rs *rules) decide(method string, segs []string, display string, context map[string]string) (verdict, error) {
	var v verdict
	call := method + " " + display
	if rs.access != nil {
		v.access = rs.access.find(method, segs, context)
		switch {
		case v.access == nil:
			return v, fmt.Errorf("%w: no access.json endpoint rule matches %s, and it has no %q rule", ErrDenied, call, FallbackKey)
		case rs.aRule[v.access.key] == AccessDeny:
			return v, fmt.Errorf("%w: access.json rule %q denies %s", ErrDenied, v.access.key, call)
		case rs.aRule[v.access.key] == AccessConfirm:
			v.confirm, v.confirmBy = true, fmt.Sprintf("access.json rule %q", v.access.key)
		}
	}
	v.policy = rs.policy.find(method, segs, context)
	if mutating(method) {
		explicit := v.access != nil && !v.access.fallback || v.policy != nil && !v.policy.fallback
		if !explicit {
			by := "no endpoint rule matches it"
			switch {
			case v.access != nil:
				by = fmt.Sprintf("only the access.json rule %q matches it, and %q refuses writes", FallbackKey, FallbackKey)
			case v.policy != nil:
				by = fmt.Sprintf("only the policy.json rule %q matches it, and %q refuses writes", FallbackKey, FallbackKey)
			}
			return v, fmt.Errorf("%w: %s is a write and %s; writes need an endpoint rule of their own", ErrDenied, call, by)
		}
	}
	if v.policy != nil {
		pr := rs.pRule[v.policy.key]
		asks := pr.Confirm == ConfirmAlways || pr.Confirm == ConfirmWrite && mutating(method)
		if !v.policy.fallback || asks && !v.confirm {
			v.reason = pr.Reason // the fallback's reason speaks of other calls than an access rule's
		}
		if asks && !v.confirm {
			v.confirm, v.confirmBy = true, fmt.Sprintf("policy.json rule %q (confirm: %s)", v.policy.key, pr.Confirm)
		}
	}
	return v, nil
}
