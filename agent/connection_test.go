package agent

import (
	"testing"
)

func TestConnectionProblems(t *testing.T) {
	conn := func(files map[string]string) map[string]string {
		out := map[string]string{}
		for name, text := range files {
			out["svc/connections/c/"+name] = text
		}
		return out
	}
	const spec = `{"baseUrl": "https://api.example.com", "format": "rest"}`
	runTreeCases(t, []treeCase{
		{name: "minimal", files: conn(map[string]string{"spec.json": spec})},
		{name: "full", files: conn(map[string]string{
			"spec.json":   `{"baseUrl": "env:API_URL", "format": "rest", "testPath": "/health", "auth": {"headers": {"Authorization": "env:TOKEN"}, "query": {"key": "env:API_KEY"}}}`,
			"policy.json": `{"endpoints": {"GET /a/{id}": {"returns": ["A"], "confirm": "never", "reason": "r"}, "POST /a": {"confirm": "write"}, "*": {"confirm": "always"}}}`,
			"access.json": `{"endpoints": {"GET /a": "allow", "DELETE /a/{id}": "deny", "*": "confirm"}, "hidden": ["email"], "rateLimit": {"requestsPerMinute": 60, "burst": 10}}`,
			"surface.md":  "# API\n",
		})},
		{name: "spec problems", files: conn(map[string]string{"spec.json": `{
  "baseUrl": "api.example.com",
  "format": "graphql",
  "testPath": "health",
  "auth": {"headers": {"Authorization": "Bearer abc", "X-Key": "env:9BAD"}},
  "timeout": 5
}`}),
			want: []Problem{
				{File: "svc/connections/c/spec.json", Line: 2, Message: `field "baseUrl" must be an absolute http(s) URL or an env: reference, got "api.example.com"`},
				{File: "svc/connections/c/spec.json", Line: 3, Message: `field "format" must be "rest" or "mcp", got "graphql"`},
				{File: "svc/connections/c/spec.json", Line: 4, Message: `field "testPath" must start with "/", got "health"`},
				{File: "svc/connections/c/spec.json", Line: 5, Message: `field "auth.headers.Authorization" must be an env: reference such as "env:NAME"; secrets do not belong in source`},
				{File: "svc/connections/c/spec.json", Line: 5, Message: `field "auth.headers.X-Key": invalid variable name "9BAD" in env: reference (want [A-Z_][A-Z0-9_]*)`},
				{File: "svc/connections/c/spec.json", Line: 6, Message: `unknown field "timeout"`},
			}},
		{name: "spec without baseUrl", files: conn(map[string]string{"spec.json": `{"format": "rest"}`}),
			want: []Problem{{File: "svc/connections/c/spec.json", Message: `missing required field "baseUrl"`}}},
		{name: "policy problems", files: conn(map[string]string{"spec.json": spec, "policy.json": `{"endpoints": {
  "get /a": {"confirm": "never"},
  "TRACE /a": {},
  "GET a": {},
  "GET /a": {"confirm": "sometimes", "limit": 1}
}}`}),
			want: []Problem{
				{File: "svc/connections/c/policy.json", Line: 2, Message: `field "endpoints": endpoint "get /a" must be "*" or "<METHOD> /path" with METHOD one of GET, POST, PUT, PATCH, DELETE, HEAD`},
				{File: "svc/connections/c/policy.json", Line: 3, Message: `field "endpoints": endpoint "TRACE /a" must be "*" or "<METHOD> /path" with METHOD one of GET, POST, PUT, PATCH, DELETE, HEAD`},
				{File: "svc/connections/c/policy.json", Line: 4, Message: `field "endpoints": endpoint "GET a" must be "*" or "<METHOD> /path" with METHOD one of GET, POST, PUT, PATCH, DELETE, HEAD`},
				{File: "svc/connections/c/policy.json", Line: 5, Message: `unknown field "endpoints.GET /a.limit"`},
				{File: "svc/connections/c/policy.json", Line: 5, Message: `field "endpoints.GET /a.confirm" must be one of never, always, write; got "sometimes"`},
			}},
		{name: "access problems", files: conn(map[string]string{"spec.json": spec, "access.json": `{
  "endpoints": {"GET /a": "maybe", "*": "deny"},
  "hidden": ["ok", " "],
  "rateLimit": {"requestsPerMinute": 0, "burst": -1}
}`}),
			want: []Problem{
				{File: "svc/connections/c/access.json", Line: 2, Message: `field "endpoints.GET /a" must be one of allow, confirm, deny; got "maybe"`},
				{File: "svc/connections/c/access.json", Line: 3, Message: `field "hidden": empty field name`},
				{File: "svc/connections/c/access.json", Line: 4, Message: `field "rateLimit.requestsPerMinute" must be more than 0, got 0`},
				{File: "svc/connections/c/access.json", Line: 4, Message: `field "rateLimit.burst" must be 0 or more, got -1`},
			}},
		{name: "mcp full", files: conn(map[string]string{
			"spec.json":   `{"baseUrl": "https://mcp.example.com/mcp", "format": "mcp", "auth": {"headers": {"Authorization": "env:MCP_TOKEN"}}}`,
			"policy.json": `{"tools": {"search": "allow", "*": "confirm"}}`,
			"access.json": `{"tools": {"delete_repo": "deny"}, "rateLimit": {"requestsPerMinute": 60}}`,
		})},
		{name: "mcp spec problems", files: conn(map[string]string{"spec.json": `{
  "baseUrl": "env:bad",
  "format": "mcp",
  "testPath": "/health",
  "auth": {"headers": {"Authorization": "Bearer abc"},
    "query": {"key": "env:KEY"}}
}`}),
			want: []Problem{
				{File: "svc/connections/c/spec.json", Line: 2, Message: `field "baseUrl": invalid variable name "bad" in env: reference (want [A-Z_][A-Z0-9_]*)`},
				{File: "svc/connections/c/spec.json", Line: 4, Message: `field "testPath" does not apply to an mcp connection: the runtime checks the server with initialize and tools/list; remove it`},
				{File: "svc/connections/c/spec.json", Line: 5, Message: `field "auth.headers.Authorization" must be an env: reference such as "env:NAME"; secrets do not belong in source`},
				{File: "svc/connections/c/spec.json", Line: 6, Message: `field "auth.query" does not apply to an mcp connection; send credentials with "auth.headers"`},
			}},
		{name: "mcp policy problems", files: conn(map[string]string{
			"spec.json": `{"baseUrl": "https://mcp.example.com/mcp", "format": "mcp"}`,
			"policy.json": `{
  "endpoints": {"GET /a": {}},
  "tools": {"search": "sometimes",
    "bad name": "allow"}
}`,
			"access.json": `{
  "tools": {"*": "block"},
  "hidden": ["email"]
}`}),
			want: []Problem{
				{File: "svc/connections/c/access.json", Line: 2, Message: `field "tools.*" must be one of allow, confirm, deny; got "block"`},
				{File: "svc/connections/c/access.json", Line: 3, Message: `field "hidden" does not apply to an mcp connection (its results are text, not fields)`},
				{File: "svc/connections/c/policy.json", Line: 2, Message: `field "endpoints" does not apply to an mcp connection; rule its tools with "tools": {"<tool>" or "*": "allow" | "confirm" | "deny"}`},
				{File: "svc/connections/c/policy.json", Line: 3, Message: `field "tools.search" must be one of allow, confirm, deny; got "sometimes"`},
				{File: "svc/connections/c/policy.json", Line: 4, Message: `field "tools": tool "bad name" must be "*" or a tool name of letters, digits, '_' and '-' (at most 64)`},
			}},
		{name: "tools on a rest connection", files: conn(map[string]string{"spec.json": spec, "policy.json": `{
  "tools": {"search": "allow"}
}`}),
			want: []Problem{{File: "svc/connections/c/policy.json", Line: 2, Message: `field "tools" applies to connections of format "mcp" only; this one is "rest" (use "endpoints")`}}},
		{name: "invalid connection name", files: map[string]string{"svc/connections/my conn/spec.json": spec},
			want: []Problem{{File: "svc/connections/my conn", Message: `invalid connection name "my conn": use letters, digits, '_' and '-' (at most 64, starting with a letter or digit)`}}},
	})
}

func TestParseEndpointKey(t *testing.T) {
	tests := []struct {
		key, method, pattern string
		ok                   bool
	}{
		{"*", "*", "", true},
		{"GET /incidents/{id}", "GET", "/incidents/{id}", true},
		{"HEAD /", "HEAD", "/", true},
		{"GET  /a", "", "", false},
		{"GET /a b", "", "", false},
		{"OPTIONS /a", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		m, p, ok := ParseEndpointKey(tt.key)
		if m != tt.method || p != tt.pattern || ok != tt.ok {
			t.Errorf("ParseEndpointKey(%q) = %q, %q, %v; want %q, %q, %v", tt.key, m, p, ok, tt.method, tt.pattern, tt.ok)
		}
	}
}
