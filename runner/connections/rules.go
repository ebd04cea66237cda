package connections

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"svc/agent"
)

// FallbackKey is the endpoint key that matches every call no other rule matches. It never
// allows a write: a mutating call needs an explicit endpoint rule.
const FallbackKey = "*"

// segKind is the kind of one pattern segment, ordered from least to most specific.
type segKind int

const (
	segParam   segKind = iota // {name}: any one non-empty segment
	segContext                // {{context.KEY}}: the session's value of KEY, escaped as a segment
	segLiteral                // anything else: that exact (decoded) segment
)

// segment is one compiled pattern segment.
type segment struct {
	kind  segKind
	value string // the literal, the parameter name or the context key
}

// rule is one compiled endpoint key of policy.json or access.json.
type rule struct {
	key      string // as written: "GET /incidents/{id}" or "*"
	method   string // "" for the fallback
	segs     []segment
	fallback bool
}

// compileRule parses an endpoint key (agent.ParseEndpointKey's syntax) into a rule.
func compileRule(key string) (*rule, error) {
	method, pattern, ok := agent.ParseEndpointKey(key)
	if !ok {
		return nil, fmt.Errorf("endpoint %q must be %q or \"<METHOD> /path\"", key, FallbackKey)
	}
	if method == FallbackKey {
		return &rule{key: key, fallback: true}, nil
	}
	r := &rule{key: key, method: method}
	for _, s := range splitPath(pattern) {
		switch {
		case strings.HasPrefix(s, "{{") && strings.HasSuffix(s, "}}"):
			k, ok := contextKey(s[2 : len(s)-2])
			if !ok {
				return nil, fmt.Errorf("endpoint %q: segment %q is not a {{context.KEY}} template", key, s)
			}
			r.segs = append(r.segs, segment{segContext, k})
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && len(s) > 2 && !strings.ContainsAny(s[1:len(s)-1], "{}"):
			r.segs = append(r.segs, segment{segParam, s[1 : len(s)-1]})
		case s == "":
			return nil, fmt.Errorf("endpoint %q: empty path segment", key)
		default:
			r.segs = append(r.segs, segment{segLiteral, s})
		}
	}
	return r, nil
}

// splitPath splits a slash path into its segments, ignoring the leading slash and one trailing
// slash: "/a/b/" and "/a/b" both give [a b]; "/" gives none.
func splitPath(p string) []string {
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// match reports whether r matches a call of method to the decoded path segments segs;
// context gives the values of {{context.KEY}} segments (a missing key matches nothing).
func (r *rule) match(method string, segs []string, context map[string]string) bool {
	if r.fallback {
		return true
	}
	if r.method != method || len(r.segs) != len(segs) {
		return false
	}
	for i, s := range r.segs {
		switch s.kind {
		case segLiteral:
			if s.value != segs[i] {
				return false
			}
		case segParam:
			if segs[i] == "" {
				return false
			}
		case segContext:
			v, ok := context[s.value]
			if !ok || v != segs[i] {
				return false
			}
		}
	}
	return true
}

// moreSpecific orders rules most specific first; it is the order in which rules are tried.
//
// Most specific, precisely: the fallback "*" comes after every other rule. Two patterns are
// compared segment by segment from the left; at the first position where their kinds differ,
// a literal segment beats a {{context.KEY}} segment, which beats a {param}. When the kinds
// agree all along, the pattern with more segments comes first, then the pattern and the
// method in byte order (only to make the order total: two rules that match the same call
// always differ in kind somewhere, or compileRules refuses them as duplicates). The method is
// not a tie-break of specificity because a rule matches one method only: rules of different
// methods never compete for the same call.
func moreSpecific(a, b *rule) int {
	if a.fallback != b.fallback {
		if a.fallback {
			return 1
		}
		return -1
	}
	for i := 0; i < len(a.segs) && i < len(b.segs); i++ {
		if c := cmp.Compare(b.segs[i].kind, a.segs[i].kind); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(len(b.segs), len(a.segs)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.pattern(), b.pattern()); c != 0 {
		return c
	}
	return cmp.Compare(a.method, b.method)
}

// pattern is the rule's path pattern ("" for the fallback).
func (r *rule) pattern() string {
	_, p, _ := strings.Cut(r.key, " ")
	return p
}

// shape is the rule's method and segment kinds and literals, with parameter names left out:
// two rules of one shape match exactly the same calls.
func (r *rule) shape() string {
	var b strings.Builder
	b.WriteString(r.method)
	for _, s := range r.segs {
		b.WriteByte('/')
		switch s.kind {
		case segParam:
			b.WriteString("{}")
		case segContext:
			b.WriteString("{{" + s.value + "}}")
		default:
			b.WriteString(s.value)
		}
	}
	return b.String()
}

// ruleSet is the compiled endpoint rules of one file, most specific first.
type ruleSet struct {
	file  string // "policy.json" or "access.json", for messages
	rules []*rule
}

// compileRules compiles the keys of one file and sorts them most specific first. Two keys
// that match exactly the same calls ("GET /a/{id}" and "GET /a/{name}") are an error naming both.
func compileRules(file string, keys []string) (*ruleSet, error) {
	rs := &ruleSet{file: file}
	shapes := make(map[string]string, len(keys))
	slices.Sort(keys)
	for _, k := range keys {
		r, err := compileRule(k)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		sh := r.shape()
		if r.fallback {
			sh = FallbackKey
		}
		if prev, dup := shapes[sh]; dup {
			return nil, fmt.Errorf("%s: endpoints %q and %q match the same calls; keep one", file, prev, k)
		}
		shapes[sh] = k
		rs.rules = append(rs.rules, r)
	}
	slices.SortFunc(rs.rules, moreSpecific)
	return rs, nil
}

// find returns the most specific rule matching the call, or nil.
func (rs *ruleSet) find(method string, segs []string, context map[string]string) *rule {
	if rs == nil {
		return nil
	}
	for _, r := range rs.rules {
		if r.match(method, segs, context) {
			return r
		}
	}
	return nil
}

// hasFallback reports whether the set has a "*" rule.
func (rs *ruleSet) hasFallback() bool {
	return rs != nil && len(rs.rules) > 0 && rs.rules[len(rs.rules)-1].fallback
}
