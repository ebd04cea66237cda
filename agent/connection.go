package agent

import (
	"regexp"
	"strconv"
	"strings"
)

// Formats of a connection's spec.json.
const (
	// FormatREST is an HTTP API the model calls through the request tool.
	FormatREST = "rest"
	// FormatMCP is an MCP server (Streamable HTTP) whose tools the model calls as
	// <connection>__<tool>.
	FormatMCP = "mcp"
)

// MCPToolSeparator joins a connection's name and its MCP tool's name: "<connection>__<tool>".
const MCPToolSeparator = "__"

// mcpToolKey is a tool name a tools rule may name: what may follow "<connection>__" in a
// model's tool name.
var mcpToolKey = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkToolRules checks the "tools" rules of policy.json or access.json: only for an mcp
// connection, keys "*" or a tool name, values allow, confirm or deny.
func checkToolRules(file, format string, rules map[string]string, doc *jsonDoc, c *collector) {
	if len(rules) > 0 && format != FormatMCP {
		c.add(file, doc.line("tools"), "field %q applies to connections of format \"mcp\" only; this one is %q (use \"endpoints\")", "tools", format)
		return
	}
	for _, key := range sortedKeys(rules) {
		field := "tools." + key
		if key != "*" && !mcpToolKey.MatchString(key) {
			c.add(file, doc.line(field), "field %q: tool %q must be \"*\" or a tool name of letters, digits, '_' and '-' (at most 64)", "tools", key)
		}
		switch rules[key] {
		case "allow", "confirm", "deny":
		default:
			c.add(file, doc.line(field), "field %q must be one of allow, confirm, deny; got %q", field, rules[key])
		}
	}
}

// isEndpointMethod reports whether m is one of the HTTP methods allowed in connection endpoint rules.
func isEndpointMethod(m string) bool {
	switch m {
	case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD":
		return true
	}
	return false
}

// ParseEndpointKey splits a policy or access key "<METHOD> <path>" into its parts. The fallback
// key "*" gives ("*", "", true).
func ParseEndpointKey(key string) (method, pattern string, ok bool) {
	if key == "*" {
		return "*", "", true
	}
	method, pattern, found := strings.Cut(key, " ")
	if !found || !isEndpointMethod(method) || !strings.HasPrefix(pattern, "/") || strings.ContainsAny(pattern, " \t\r\n") {
		return "", "", false
	}
	return method, pattern, true
}

func checkEndpointKey(file, field, key string, doc *jsonDoc, c *collector) {
	if _, _, ok := ParseEndpointKey(key); !ok {
		c.add(file, doc.line(field+"."+key), "field %q: endpoint %q must be \"*\" or \"<METHOD> /path\" with METHOD one of GET, POST, PUT, PATCH, DELETE, HEAD", field, key)
	}
}

// parseConnectionSpec decodes and validates connections/<name>/spec.json.
func parseConnectionSpec(file string, data []byte, c *collector) ConnectionSpec {
	var spec ConnectionSpec
	doc, issues := decodeJSONStrict(data, &spec)
	c.addJSON(file, issues)
	if len(issues) > 0 && len(doc.lines) == 0 {
		return spec
	}
	doc.require(c, file, "baseUrl", spec.BaseURL == "", "")
	if msg := checkBaseURL("baseUrl", spec.BaseURL); spec.BaseURL != "" && msg != "" {
		c.add(file, doc.line("baseUrl"), "%s", msg)
	}
	switch spec.Format {
	case FormatREST:
	case FormatMCP:
		if spec.TestPath != "" {
			c.add(file, doc.line("testPath"), "field %q does not apply to an mcp connection: the runtime checks the server with initialize and tools/list; remove it", "testPath")
		}
		if spec.Auth != nil && len(spec.Auth.Query) > 0 {
			c.add(file, doc.line("auth.query"), "field %q does not apply to an mcp connection; send credentials with %q", "auth.query", "auth.headers")
		}
	default:
		c.add(file, doc.line("format"), "field %q must be \"rest\" or \"mcp\", got %q", "format", spec.Format)
	}
	if spec.TestPath != "" && spec.Format != FormatMCP && !strings.HasPrefix(spec.TestPath, "/") {
		c.add(file, doc.line("testPath"), "field %q must start with \"/\", got %q", "testPath", spec.TestPath)
	}
	if a := spec.Auth; a != nil {
		for _, part := range []struct {
			field  string
			values map[string]string
		}{{"auth.headers", a.Headers}, {"auth.query", a.Query}} {
			for _, k := range sortedKeys(part.values) {
				field := part.field + "." + k
				if k == "" {
					c.add(file, doc.line(field), "field %q: empty name", part.field)
				}
				if msg := checkEnvRef(field, part.values[k]); msg != "" {
					c.add(file, doc.line(field), "%s", msg)
				}
			}
		}
	}
	return spec
}

// parsePolicy decodes and validates connections/<name>/policy.json.
// format is the connection's (spec.json), which says whether "endpoints" or "tools" apply.
func parsePolicy(file string, data []byte, format string, c *collector) *Policy {
	p := &Policy{}
	doc, issues := decodeJSONStrict(data, p)
	c.addJSON(file, issues)
	checkToolRules(file, format, p.Tools, doc, c)
	checkNoEndpoints(file, format, len(p.Endpoints), doc, c)
	for _, key := range sortedKeys(p.Endpoints) {
		checkEndpointKey(file, "endpoints", key, doc, c)
		switch confirm := p.Endpoints[key].Confirm; confirm {
		case "", "never", "always", "write":
		default:
			field := "endpoints." + key + ".confirm"
			c.add(file, doc.line(field), "field %q must be one of never, always, write; got %q", field, confirm)
		}
	}
	return p
}

// parseAccess decodes and validates connections/<name>/access.json.
// format is the connection's (spec.json), which says whether "endpoints" or "tools" apply.
func parseAccess(file string, data []byte, format string, c *collector) *Access {
	a := &Access{}
	doc, issues := decodeJSONStrict(data, a)
	c.addJSON(file, issues)
	checkToolRules(file, format, a.Tools, doc, c)
	checkNoEndpoints(file, format, len(a.Endpoints), doc, c)
	if format == FormatMCP && len(a.Hidden) > 0 {
		c.add(file, doc.line("hidden"), "field %q does not apply to an mcp connection (its results are text, not fields)", "hidden")
	}
	for _, key := range sortedKeys(a.Endpoints) {
		checkEndpointKey(file, "endpoints", key, doc, c)
		switch rule := a.Endpoints[key]; rule {
		case "allow", "confirm", "deny":
		default:
			c.add(file, doc.line("endpoints."+key), "field %q must be one of allow, confirm, deny; got %q", "endpoints."+key, rule)
		}
	}
	for i, h := range a.Hidden {
		if strings.TrimSpace(h) == "" {
			c.add(file, doc.line("hidden["+strconv.Itoa(i)+"]"), "field %q: empty field name", "hidden")
		}
	}
	if r := a.RateLimit; r != nil {
		if r.RequestsPerMinute <= 0 {
			c.add(file, doc.lineOr("rateLimit.requestsPerMinute", "rateLimit"), "field %q must be more than 0, got %d", "rateLimit.requestsPerMinute", r.RequestsPerMinute)
		}
		if r.Burst < 0 {
			c.add(file, doc.line("rateLimit.burst"), "field %q must be 0 or more, got %d", "rateLimit.burst", r.Burst)
		}
	}
	return a
}

// checkNoEndpoints refuses endpoint rules on an mcp connection, which has tools, not paths.
func checkNoEndpoints(file, format string, n int, doc *jsonDoc, c *collector) {
	if format == FormatMCP && n > 0 {
		c.add(file, doc.line("endpoints"), "field %q does not apply to an mcp connection; rule its tools with \"tools\": {\"<tool>\" or \"*\": \"allow\" | \"confirm\" | \"deny\"}", "endpoints")
	}
}
