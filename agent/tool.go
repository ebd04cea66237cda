package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/evanw/esbuild/pkg/api"

	"svc/agent/toolschema"
)

// Tool layouts.
const (
	LayoutHandler = "handler" // tool.json + handler.ts
	LayoutToolTS  = "tool.ts" // tool.ts alone
)

// checkToolName returns a problem message when name cannot name a tool under svc/tools, else "".
func checkToolName(name string) string {
	if msg := checkName("tool", name); msg != "" {
		return msg
	}
	for _, b := range BuiltinTools() {
		if name == b {
			return fmt.Sprintf("tool name %q is reserved for a built-in tool", name)
		}
	}
	if strings.HasPrefix(name, "store__") {
		return fmt.Sprintf("tool name %q is reserved: store__ names are generated from svc/stores", name)
	}
	return ""
}

// parseToolJSON decodes and validates svc/tools/<dir>/tool.json. The returned doc gives the lines of
// the "uses" entries, checked once every tool and agent is known.
func parseToolJSON(file, dir string, data []byte, c *collector) (*Tool, *jsonDoc) {
	t := &Tool{}
	doc, issues := decodeJSONStrict(data, t)
	c.addJSON(file, issues)
	if len(issues) > 0 && len(doc.lines) == 0 {
		t.Name = dir
		return t, doc
	}
	switch t.Name {
	case dir:
	case "":
		doc.require(c, file, "name", true, fmt.Sprintf("the folder name, %q", dir))
	default:
		c.add(file, doc.line("name"), "field %q is %q but must equal the folder name %q", "name", t.Name, dir)
	}
	t.Name = dir
	switch t.Execution {
	case "", "durable":
	default:
		c.add(file, doc.line("execution"), "field %q must be \"durable\" or absent, got %q", "execution", t.Execution)
	}
	doc.require(c, file, "parameters", len(t.Parameters) == 0, `a JSON schema with "type": "object"`)
	if len(t.Parameters) > 0 {
		if msg := checkParametersSchema(t.Parameters); msg != "" {
			c.add(file, doc.line("parameters"), "field %q: %s", "parameters", msg)
		} else {
			compileParameters(file, t.Parameters, doc, c)
		}
	}
	return t, doc
}

// compileParameters compiles a tool's parameter schema as the runtime will, so that a schema
// that cannot check calls fails the build rather than every call: each problem at its line,
// such as a $ref to a file or URL (the compiler loads nothing outside the schema).
func compileParameters(file string, raw json.RawMessage, doc *jsonDoc, c *collector) {
	_, err := toolschema.Compile(raw)
	var se *toolschema.SchemaError
	if err == nil || !errors.As(err, &se) {
		if err != nil {
			c.add(file, doc.line("parameters"), "field %q: %v", "parameters", err)
		}
		return
	}
	external := errors.Is(err, toolschema.ErrExternalRef)
	for _, p := range se.Problems {
		path := "parameters"
		if p.Path != "" {
			path += "." + p.Path
		}
		msg := p.Message
		if !external {
			msg = "not a valid JSON Schema: " + msg
		}
		c.add(file, doc.lineOr(append([]string{path}, ancestors(path)...)...), "field %q: %s", path, msg)
	}
}

// ancestors returns the paths that enclose path, nearest first: "a.b[1].c" gives "a.b[1]",
// "a.b", "a".
func ancestors(path string) []string {
	var out []string
	for {
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return out
		}
		path = path[:i]
		out = append(out, path)
	}
}

// checkParametersSchema checks the outline of a tool's parameter schema: an object schema whose
// "properties" are schemas and whose "required" names listed properties.
func checkParametersSchema(raw json.RawMessage) string {
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		return "must be a JSON schema object"
	}
	var typ string
	if err := json.Unmarshal(schema["type"], &typ); err != nil || typ != "object" {
		return `must have "type": "object"`
	}
	var props map[string]json.RawMessage
	if p, ok := schema["properties"]; ok {
		if err := json.Unmarshal(p, &props); err != nil {
			return `"properties" must be an object of schemas`
		}
		for _, k := range sortedKeys(props) {
			var prop map[string]json.RawMessage
			if err := json.Unmarshal(props[k], &prop); err != nil || prop == nil {
				return fmt.Sprintf("property %q must be a schema object", k)
			}
		}
	}
	if r, ok := schema["required"]; ok {
		var required []string
		if err := json.Unmarshal(r, &required); err != nil {
			return `"required" must be an array of property names`
		}
		for _, name := range required {
			if _, ok := props[name]; !ok {
				return fmt.Sprintf("required property %q is not in \"properties\"", name)
			}
		}
	}
	return ""
}

// compileTypeScript turns a handler's TypeScript into a CommonJS program with an inline source map
// naming file, and checks that it has a default export. Errors are problems at their line.
func compileTypeScript(file string, src []byte, c *collector) string {
	res := api.Transform(string(src), api.TransformOptions{
		Loader:     api.LoaderTS,
		Format:     api.FormatCommonJS,
		Target:     api.ES2017,
		Sourcemap:  api.SourceMapInline,
		Sourcefile: file,
		LogLevel:   api.LogLevelSilent,
	})
	for _, m := range res.Errors {
		line := 0
		if m.Location != nil {
			line = m.Location.Line
		}
		c.add(file, line, "TypeScript does not compile: %s", m.Text)
	}
	if len(res.Errors) > 0 {
		return ""
	}
	js := string(res.Code)
	if !hasDefaultExport(js) {
		c.add(file, 0, "no default export: the handler must \"export default async function (params, ctx)\"")
	}
	return js
}

// hasDefaultExport reports whether esbuild's CommonJS output exports a default: esbuild lists ES
// exports in an "__export(x_exports, {...})" call, one "name: () => value" line each.
func hasDefaultExport(js string) bool {
	if i := strings.Index(js, "__export("); i >= 0 {
		block := js[i:]
		if end := strings.Index(block, "\n});"); end >= 0 {
			block = block[:end]
		}
		if strings.Contains(block, "\n  default: () =>") {
			return true
		}
	}
	for line := range strings.SplitSeq(js, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "exports.default ="), strings.HasPrefix(line, "module.exports.default ="):
			return true
		case strings.HasPrefix(line, "module.exports =") && !strings.HasPrefix(line, "module.exports = __toCommonJS("):
			return true
		}
	}
	return false
}
