package agent

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestToolProblems(t *testing.T) {
	const handler = "export default async function (params: any, ctx: any) { return params }\n"
	tool := func(json, ts string) map[string]string {
		files := map[string]string{}
		if json != "" {
			files["svc/tools/x/tool.json"] = json
		}
		if ts != "" {
			files["svc/tools/x/handler.ts"] = ts
		}
		return files
	}
	const tj = "svc/tools/x/tool.json"
	runTreeCases(t, []treeCase{
		{name: "minimal", files: tool(`{"name": "x", "parameters": {"type": "object"}}`, handler)},
		{name: "missing both files", files: map[string]string{"svc/tools/x/README.md": "x"},
			want: []Problem{
				{File: "svc/tools/x/handler.ts", Message: `missing handler.ts of tool "x"`},
				{File: tj, Message: `missing tool.json of tool "x" (or a tool.ts)`},
			}},
		{name: "name and fields", files: tool(`{
  "name": "y",
  "description": 3,
  "parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
  "execution": "later",
  "timeout": 5
}`, handler),
			want: []Problem{
				{File: tj, Line: 2, Message: `field "name" is "y" but must equal the folder name "x"`},
				{File: tj, Line: 3, Message: `field "description" must be a string, got a number`},
				{File: tj, Line: 4, Message: `field "parameters": required property "b" is not in "properties"`},
				{File: tj, Line: 5, Message: `field "execution" must be "durable" or absent, got "later"`},
				{File: tj, Line: 6, Message: `unknown field "timeout"`},
			}},
		{name: "requiresConfirmation", files: tool(`{"name": "x", "parameters": {"type": "object"}, "requiresConfirmation": true}`, handler)},
		{name: "requiresConfirmation not a boolean", files: tool(`{"name": "x", "parameters": {"type": "object"},
  "requiresConfirmation": "yes"}`, handler),
			want: []Problem{{File: tj, Line: 2, Message: `field "requiresConfirmation" must be a boolean, got a string`}}},
		{name: "missing name and parameters", files: tool(`{}`, handler),
			want: []Problem{
				{File: tj, Message: `missing required field "name" (the folder name, "x")`},
				{File: tj, Message: `missing required field "parameters" (a JSON schema with "type": "object")`},
			}},
		{name: "parameters not an object schema", files: tool(`{"name": "x", "parameters": {"type": "string"}}`, handler),
			want: []Problem{{File: tj, Line: 1, Message: `field "parameters": must have "type": "object"`}}},
		{name: "parameters not an object", files: tool(`{"name": "x", "parameters": [1]}`, handler),
			want: []Problem{{File: tj, Line: 1, Message: `field "parameters": must be a JSON schema object`}}},
		{name: "parameters null", files: tool(`{"name": "x", "parameters": null}`, handler),
			want: []Problem{{File: tj, Line: 1, Message: `field "parameters": must be a JSON schema object`}}},
		{name: "property not a schema", files: tool(`{"name": "x", "parameters": {"type": "object", "properties": {"a": 1}}}`, handler),
			want: []Problem{{File: tj, Line: 1, Message: `field "parameters": property "a" must be a schema object`}}},
		{name: "parameters not a valid JSON Schema", files: tool(`{"name": "x", "parameters": {
  "type": "object",
  "properties": {
    "a": {"type": "strin"},
    "b": {"type": "integer", "minimum": "1"},
    "c": {"type": "string", "pattern": "(?<=x)y"}
  }
}}`, handler),
			want: []Problem{
				{File: tj, Line: 4, Message: `field "parameters.properties.a.type": not a valid JSON Schema: must be one of "array", "boolean", "integer", "null", "number", "object", "string"; got "strin"`},
				{File: tj, Line: 5, Message: `field "parameters.properties.b.minimum": not a valid JSON Schema: must be a number, got string`},
				{File: tj, Line: 6, Message: `field "parameters.properties.c.pattern": not a valid JSON Schema: must be a valid regex; got "(?<=x)y"`},
			}},
		{name: "parameters refer outside", files: tool(`{"name": "x", "parameters": {
  "type": "object",
  "properties": {
    "a": {"$ref": "file:///etc/passwd"},
    "b": {"items": {"$ref": "https://example.com/schema.json"}},
    "c": {"$ref": "common.json#/$defs/c"}
  }
}}`, handler),
			want: []Problem{
				{File: tj, Line: 4, Message: `field "parameters.properties.a.$ref": "file:///etc/passwd" points outside the schema: a tool's parameters may refer only to themselves, such as "#/$defs/name"`},
				{File: tj, Line: 5, Message: `field "parameters.properties.b.items.$ref": "https://example.com/schema.json" points outside the schema: a tool's parameters may refer only to themselves, such as "#/$defs/name"`},
				{File: tj, Line: 6, Message: `field "parameters.properties.c.$ref": "common.json#/$defs/c" points outside the schema: a tool's parameters may refer only to themselves, such as "#/$defs/name"`},
			}},
		{name: "parameters $ref to nothing", files: tool(`{"name": "x", "parameters": {"type": "object",
  "properties": {"a": {"$ref": "#/$defs/missing"}}}}`, handler),
			want: []Problem{{File: tj, Line: 1, Message: `field "parameters": not a valid JSON Schema: "#/$defs/missing" points to nothing in the schema`}}},
		{name: "parameters with $defs", files: tool(`{"name": "x", "parameters": {"type": "object",
  "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string", "enum": ["p", "q"]}}}}`, handler)},
		{name: "does not compile", files: tool(`{"name": "x", "parameters": {"type": "object"}}`, "export default async function () {\n  return (\n}\n"),
			want: []Problem{{File: "svc/tools/x/handler.ts", Line: 3, Message: `TypeScript does not compile: Unexpected "}"`}}},
		{name: "no default export", files: tool(`{"name": "x", "parameters": {"type": "object"}}`, "export const run = async () => 1\n"),
			want: []Problem{{File: "svc/tools/x/handler.ts", Message: `no default export: the handler must "export default async function (params, ctx)"`}}},
		{name: "reserved names", files: map[string]string{
			"svc/tools/load_skill/tool.ts":                      "export default () => 1",
			"svc/tools/store__x__get/tool.ts":                   "export default () => 1",
			"svc/tools/bad.name/tool.ts":                        "export default () => 1",
			"svc/tools/" + strings.Repeat("t", 65) + "/tool.ts": "export default () => 1",
		}, want: []Problem{
			{File: "svc/tools/bad.name", Message: `invalid tool name "bad.name": use letters, digits, '_' and '-' (at most 64, starting with a letter or digit)`},
			{File: "svc/tools/load_skill", Message: `tool name "load_skill" is reserved for a built-in tool`},
			{File: "svc/tools/store__x__get", Message: `tool name "store__x__get" is reserved: store__ names are generated from svc/stores`},
			{File: "svc/tools/" + strings.Repeat("t", 65), Message: `invalid tool name "` + strings.Repeat("t", 65) + `": use letters, digits, '_' and '-' (at most 64, starting with a letter or digit)`},
		}},
		{name: "tool.ts does not compile", files: map[string]string{"svc/tools/x/tool.ts": "export default (a: number => a\n"},
			want: []Problem{{File: "svc/tools/x/tool.ts", Line: 1, Message: `TypeScript does not compile: Expected ")" but found "=>"`}}},
	})
}

func TestHasDefaultExport(t *testing.T) {
	tests := []struct {
		src  string
		want bool
	}{
		{"export default async function triage(p: any) { return 1 }", true},
		{"const f = async () => 1; export default f;", true},
		{"function g() {}; export { g as default }", true},
		{"module.exports = async function () {}", true},
		{"exports.default = async function () {}", true},
		{"export const x = 1", false},
		{"export const o = {\n  default: () => 1\n}", false},
		{"const x = 1", false},
	}
	for _, tt := range tests {
		var c collector
		js := compileTypeScript("h.ts", []byte(tt.src), &c)
		if got := hasDefaultExport(js); got != tt.want || js == "" {
			t.Errorf("hasDefaultExport(compile(%q)) = %v, want %v\n%s", tt.src, got, tt.want, js)
		}
	}
}

func TestCompileTypeScriptSourceMap(t *testing.T) {
	var c collector
	js := compileTypeScript("svc/tools/t/handler.ts", []byte("export default async (p: {a: number}) => p.a\n"), &c)
	if c.problems != nil {
		t.Fatal(c.problems)
	}
	for _, want := range []string{"module.exports", "async (p) => p.a"} {
		if !strings.Contains(js, want) {
			t.Errorf("compiled JS lacks %q:\n%s", want, js)
		}
	}
	const prefix = "//# sourceMappingURL=data:application/json;base64,"
	i := strings.LastIndex(js, prefix)
	if i < 0 {
		t.Fatalf("compiled JS has no inline source map:\n%s", js)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(js[i+len(prefix):]))
	if err != nil {
		t.Fatal(err)
	}
	var sourceMap struct {
		Sources []string `json:"sources"`
	}
	if err := json.Unmarshal(raw, &sourceMap); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"svc/tools/t/handler.ts"}, sourceMap.Sources); diff != "" {
		t.Errorf("source map sources (-want +got):\n%s", diff)
	}
}

func BenchmarkCompileTypeScript(b *testing.B) {
	src := []byte(readFixtureFile(b, "support-desk", "svc/tools/refund_request/handler.ts"))
	for b.Loop() {
		var c collector
		if compileTypeScript("handler.ts", src, &c) == "" {
			b.Fatal(c.problems)
		}
	}
}
