package connections

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"svc/agent"
)

// Effects of an endpoint rule, as Describe and Prompt show them.
const (
	EffectAllow       = "allow"
	EffectConfirm     = "confirm" // the user is asked first
	EffectDeny        = "deny"
	EffectReadsOnly   = "allow reads, refuse writes"   // the "*" fallback
	EffectConfirmRead = "confirm reads, refuse writes" // the "*" fallback with confirm always or access confirm
)

// Description is a connection as /inspect/connections/{name} shows it: its spec with every
// credential as its env: reference (never a value), and its endpoint rules resolved.
type Description struct {
	Name     string `json:"name"`
	BaseURL  string `json:"baseUrl"` // as written: a URL, or an env: reference the caller may resolve
	Format   string `json:"format"`
	TestPath string `json:"testPath,omitempty"`
	Auth     *Auth  `json:"auth,omitempty"`
	// Endpoints are the rules of policy.json and access.json merged by key, in the order they
	// are tried (most specific first, "*" last).
	Endpoints []Endpoint       `json:"endpoints"`
	Hidden    []string         `json:"hidden"`
	RateLimit *agent.RateLimit `json:"rateLimit,omitempty"`
	Surface   string           `json:"surface"`
}

// Auth lists the credentials a connection sends.
type Auth struct {
	Headers []Credential `json:"headers"`
	Query   []Credential `json:"query"`
}

// Credential is one credential: its header or query name and where its value comes from.
type Credential struct {
	Name string `json:"name"`
	Ref  string `json:"ref"` // "env:NAME", or "(literal value hidden)"
}

// Endpoint is one endpoint key with what both files say about it.
type Endpoint struct {
	Key     string   `json:"key"`
	Method  string   `json:"method"` // "*" for the fallback
	Pattern string   `json:"pattern,omitempty"`
	Access  string   `json:"access,omitempty"`  // access.json: allow | confirm | deny; "" when not listed there
	Confirm string   `json:"confirm,omitempty"` // policy.json: never | always | write; "" when not listed there
	Reason  string   `json:"reason,omitempty"`
	Returns []string `json:"returns,omitempty"`
	// Effect is what a call matching the pattern gets with both files applied (Effect*
	// constants), for parameter values no more specific rule names. For "*", it is what the
	// fallback does to a call no other rule matches.
	Effect string `json:"effect"`
}

// Describe resolves conn's rules for /inspect/connections/{name}. It reads no secret; the
// caller may add whether each env: reference is set.
func Describe(conn *agent.Connection) Description {
	d := Description{
		Name: conn.Name, BaseURL: conn.Spec.BaseURL, Format: conn.Spec.Format, TestPath: conn.Spec.TestPath,
		Endpoints: endpoints(conn), Hidden: []string{}, Surface: conn.Surface,
	}
	if a := conn.Spec.Auth; a != nil {
		creds := func(m map[string]string) []Credential {
			out := []Credential{}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				ref := m[k]
				if _, ok := agent.ParseEnvRef(ref); !ok {
					ref = "(literal value hidden)"
				}
				out = append(out, Credential{Name: k, Ref: ref})
			}
			return out
		}
		d.Auth = &Auth{Headers: creds(a.Headers), Query: creds(a.Query)}
	}
	if a := conn.Access; a != nil {
		d.Hidden = append(d.Hidden, a.Hidden...)
		d.RateLimit = a.RateLimit
	}
	return d
}

// endpoints merges the keys of both files, most specific first.
func endpoints(conn *agent.Connection) []Endpoint {
	byKey := map[string]*Endpoint{}
	get := func(key string) *Endpoint {
		if e := byKey[key]; e != nil {
			return e
		}
		method, pattern, _ := agent.ParseEndpointKey(key)
		e := &Endpoint{Key: key, Method: method, Pattern: pattern}
		byKey[key] = e
		return e
	}
	if conn.Policy != nil {
		for k, r := range conn.Policy.Endpoints {
			e := get(k)
			e.Confirm, e.Reason, e.Returns = cmp.Or(r.Confirm, ConfirmNever), r.Reason, r.Returns
		}
	}
	if conn.Access != nil {
		for k, v := range conn.Access.Endpoints {
			get(k).Access = v
		}
	}
	type ordered struct {
		r *rule
		e *Endpoint
	}
	rs, rsErr := compileConnRules(conn)
	var list []ordered
	for k, e := range byKey {
		r, err := compileRule(k)
		if err != nil {
			r = &rule{key: k, method: k} // New refuses such a key; shown last, as written
		}
		e.Effect = effect(e)
		if err == nil && rsErr == nil && !r.fallback {
			e.Effect = effectiveEffect(rs, r)
		}
		list = append(list, ordered{r, e})
	}
	slices.SortFunc(list, func(a, b ordered) int { return moreSpecific(a.r, b.r) })
	out := make([]Endpoint, len(list))
	for i, o := range list {
		out[i] = *o.e
	}
	return out
}

// effectiveEffect decides a call that r matches, with a value in each {param} and
// {{context.KEY}} segment that no literal rule names.
func effectiveEffect(rs *rules, r *rule) string {
	segs := make([]string, len(r.segs))
	ctx := map[string]string{}
	for i, s := range r.segs {
		switch s.kind {
		case segLiteral:
			segs[i] = s.value
		case segParam:
			segs[i] = "\x00" + s.value
		case segContext:
			segs[i] = "\x00{{" + s.value + "}}"
			ctx[s.value] = segs[i]
		}
	}
	v, err := rs.decide(r.method, segs, r.pattern(), ctx)
	switch {
	case err != nil:
		return EffectDeny
	case v.confirm:
		return EffectConfirm
	}
	return EffectAllow
}

// effect is what one key does to a call it matches, by itself.
func effect(e *Endpoint) string {
	asks := e.Access == AccessConfirm || e.Confirm == ConfirmAlways || e.Confirm == ConfirmWrite && mutating(e.Method)
	switch {
	case e.Access == AccessDeny:
		return EffectDeny
	case e.Key == FallbackKey && asks:
		return EffectConfirmRead
	case e.Key == FallbackKey:
		return EffectReadsOnly
	case asks:
		return EffectConfirm
	}
	return EffectAllow
}

// Prompt is the system prompt section for conns (a named agent's connections, or all of them
// for the unscoped chat): how to call the request tool, then each connection's name, its
// surface.md, its endpoints with what asks the user first and what is refused, and its rate
// limit. It is "" without connections. It may hold {{context.KEY}} templates (from surface.md
// or endpoint patterns), which the prompt's Fill completes like the rest of the prompt.
func Prompt(conns []*agent.Connection) string {
	conns = slices.DeleteFunc(slices.Clone(conns), func(c *agent.Connection) bool { return c == nil })
	if len(conns) == 0 {
		return ""
	}
	slices.SortFunc(conns, func(a, b *agent.Connection) int { return cmp.Compare(a.Name, b.Name) })
	var b strings.Builder
	b.WriteString("## Connections\n")
	b.WriteString("Call these HTTP APIs with the request tool. Give the path relative to the connection, such as /items/42, never a full URL. ")
	b.WriteString(`Reads use GET. A write (POST, PUT, PATCH, DELETE) needs intent "write"; use "confirmed_write" only when the user has already confirmed that exact change in this conversation. `)
	b.WriteString("Calls marked \"asks the user first\" wait for the user's approval; calls marked \"refused\" fail.\n")
	for _, c := range conns {
		b.WriteString("\n### ")
		b.WriteString(c.Name)
		b.WriteString("\n")
		if s := strings.TrimSpace(c.Surface); s != "" {
			b.WriteString(demoteHeadings(s))
			b.WriteString("\n")
		}
		eps := endpoints(c)
		readable := slices.Clone(eps)
		slices.SortStableFunc(readable, func(a, b Endpoint) int {
			return cmp.Or(cmp.Compare(a.Pattern, b.Pattern), cmp.Compare(slices.Index(methods, a.Method), slices.Index(methods, b.Method)))
		})
		if len(eps) > 0 {
			b.WriteString("\nEndpoints:\n")
		}
		listed := false
		for _, e := range readable {
			if e.Key == FallbackKey {
				continue
			}
			listed = true
			fmt.Fprintf(&b, "- %s %s", e.Method, e.Pattern)
			if e.Reason != "" {
				b.WriteString(": " + e.Reason)
			}
			if len(e.Returns) > 0 {
				b.WriteString(" (returns " + strings.Join(e.Returns, ", ") + ")")
			}
			switch e.Effect {
			case EffectDeny:
				b.WriteString(" — refused")
			case EffectConfirm:
				b.WriteString(" — asks the user first")
			}
			b.WriteString("\n")
		}
		b.WriteString(fallbackLine(c, eps, listed))
		if c.Access != nil && c.Access.RateLimit != nil {
			rl := c.Access.RateLimit
			fmt.Fprintf(&b, "At most %d requests a minute (bursts of %d).\n", rl.RequestsPerMinute, max(1, rl.Burst))
		}
	}
	return b.String()
}

// demoteHeadings puts the Markdown headings of a surface.md below the "### <connection>"
// heading it is shown under ("# Title" becomes "#### Title"), outside fenced code.
func demoteHeadings(s string) string {
	lines := strings.Split(s, "\n")
	fenced := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(l, "#"):
			lines[i] = "###" + l
		}
	}
	return strings.Join(lines, "\n")
}

// fallbackLine says what happens to calls no listed endpoint matches.
func fallbackLine(c *agent.Connection, eps []Endpoint, listed bool) string {
	other := "- Any other call"
	if !listed {
		other = "- Any call"
	}
	if c.Access != nil && len(c.Access.Endpoints) > 0 && c.Access.Endpoints[FallbackKey] == "" {
		return other + " — refused\n"
	}
	for _, e := range eps {
		if e.Key != FallbackKey {
			continue
		}
		line := other
		if e.Reason != "" {
			line += ": " + e.Reason
		}
		switch e.Effect {
		case EffectDeny:
			return line + " — refused\n"
		case EffectConfirmRead:
			return line + " — reads ask the user first; writes are refused\n"
		}
		return line + " — reads only; writes are refused\n"
	}
	return other + " — reads only; writes are refused\n"
}

// MCPPrompt is the system prompt's section on mcp connections: what each server's surface.md
// says of it, under the prefix its tools carry; "" when none has a surface.md (the tools' own
// descriptions speak for them).
func MCPPrompt(conns []*agent.Connection) string {
	conns = slices.DeleteFunc(slices.Clone(conns), func(c *agent.Connection) bool { return c == nil || strings.TrimSpace(c.Surface) == "" })
	if len(conns) == 0 {
		return ""
	}
	slices.SortFunc(conns, func(a, b *agent.Connection) int { return cmp.Compare(a.Name, b.Name) })
	var b strings.Builder
	b.WriteString("## MCP servers\n")
	b.WriteString("The tools named <server>__<tool> are those of these MCP servers.\n")
	for _, c := range conns {
		b.WriteString("\n### ")
		b.WriteString(c.Name)
		b.WriteString(" (tools ")
		b.WriteString(mcpPrefix(c.Name))
		b.WriteString("*)\n")
		b.WriteString(demoteHeadings(strings.TrimSpace(c.Surface)))
		b.WriteString("\n")
	}
	return b.String()
}
