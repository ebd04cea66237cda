package agent

import (
	"strconv"
	"strings"
)

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
	if spec.Format != "rest" {
		c.add(file, doc.line("format"), "field %q must be \"rest\", got %q", "format", spec.Format)
	}
	if spec.TestPath != "" && !strings.HasPrefix(spec.TestPath, "/") {
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
func parsePolicy(file string, data []byte, c *collector) *Policy {
	p := &Policy{}
	doc, issues := decodeJSONStrict(data, p)
	c.addJSON(file, issues)
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
func parseAccess(file string, data []byte, c *collector) *Access {
	a := &Access{}
	doc, issues := decodeJSONStrict(data, a)
	c.addJSON(file, issues)
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
