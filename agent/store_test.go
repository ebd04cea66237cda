package agent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStoreProblems(t *testing.T) {
	store := func(name, text string) map[string]string {
		return map[string]string{"svc/stores/" + name + ".json": text}
	}
	runTreeCases(t, []treeCase{
		{name: "minimal", files: store("s", `{"name": "s", "entity": {"name": "S", "key": "{id}", "schema": {"id": {"type": "string"}}}}`)},
		{name: "name differs from file", files: store("s", `{"name": "other", "entity": {"name": "S", "key": "{id}", "schema": {"id": {"type": "string"}}}}`),
			want: []Problem{{File: "svc/stores/s.json", Line: 1, Message: `field "name" is "other" but must equal the file name "s"`}}},
		{name: "empty object", files: store("s", `{}`),
			want: []Problem{
				{File: "svc/stores/s.json", Message: `missing required field "name" (the file name, "s")`},
				{File: "svc/stores/s.json", Message: `missing required field "entity.name"`},
				{File: "svc/stores/s.json", Message: `missing required field "entity.schema" (at least one field)`},
				{File: "svc/stores/s.json", Message: `missing required field "entity.key" (a template such as "{id}")`},
			}},
		{name: "schema problems", files: store("s", `{"name": "s", "entity": {"name": "S",
  "key": "{id}-{nope}",
  "schema": {
    "id": {"type": "string", "values": ["a"]},
    "state": {"type": "enum"},
    "kind": {"type": "enum", "values": ["a", "b", "a"]},
    "when": {"type": "date"},
    "what": {},
    "extra": {"type": "string", "format": "email"}
  }},
  "history": {"versions": -1}}`),
			want: []Problem{
				{File: "svc/stores/s.json", Line: 2, Message: `field "entity.key": {nope} is not a field of entity.schema`},
				{File: "svc/stores/s.json", Line: 4, Message: `field "entity.schema.id.values": values are only allowed for type enum`},
				{File: "svc/stores/s.json", Line: 5, Message: `field "entity.schema.state": type enum needs a non-empty "values" list`},
				{File: "svc/stores/s.json", Line: 6, Message: `field "entity.schema.kind.values": duplicate enum value "a"`},
				{File: "svc/stores/s.json", Line: 7, Message: `field "entity.schema.when.type" must be one of string, integer, number, boolean, enum, object, array; got "date"`},
				{File: "svc/stores/s.json", Line: 8, Message: `missing required field "entity.schema.what.type"`},
				{File: "svc/stores/s.json", Line: 9, Message: `unknown field "entity.schema.extra.format"`},
				{File: "svc/stores/s.json", Line: 11, Message: `field "history.versions" must be 0 or more, got -1`},
			}},
		{name: "versions not an integer", files: store("s", `{"name": "s", "entity": {"name": "S", "key": "{id}", "schema": {"id": {"type": "string"}}}, "history": {"versions": 1.5}}`),
			want: []Problem{{File: "svc/stores/s.json", Line: 1, Message: `field "history.versions" must be an integer, got 1.5`}}},
		{name: "bad key template", files: store("s", `{"name": "s", "entity": {"name": "S", "key": "{id", "schema": {"id": {"type": "string"}}}}`),
			want: []Problem{{File: "svc/stores/s.json", Line: 1, Message: `field "entity.key": unclosed '{' in key template "{id"`}}},
		{name: "colliding tool names", files: map[string]string{
			"svc/stores/a-b.json": `{"name": "a-b", "entity": {"name": "S", "key": "{id}", "schema": {"id": {"type": "string"}}}}`,
			"svc/stores/a_b.json": `{"name": "a_b", "entity": {"name": "S", "key": "{id}", "schema": {"id": {"type": "string"}}}}`,
		}, want: []Problem{{File: "svc/stores/a_b.json", Message: `stores "a-b" and "a_b" generate the same tool names (store__a_b__get)`}}},
		{name: "name too long for tool names", files: store(strings.Repeat("s", 49), `{"name": "`+strings.Repeat("s", 49)+`", "entity": {"name": "S", "key": "{id}", "schema": {"id": {"type": "string"}}}}`),
			want: []Problem{{File: "svc/stores/" + strings.Repeat("s", 49) + ".json", Message: `store name "` + strings.Repeat("s", 49) + `" is too long: its tool "store__` + strings.Repeat("s", 49) + `__history" exceeds 64 characters`}}},
		{name: "name at the tool name limit", files: store(strings.Repeat("s", 48), `{"name": "`+strings.Repeat("s", 48)+`", "entity": {"name": "S", "key": "{id}", "schema": {"id": {"type": "string"}}}}`)},
	})
}

func TestKeyFields(t *testing.T) {
	tests := []struct {
		template string
		want     []string
		err      string
	}{
		{"{id}", []string{"id"}, ""},
		{"{customer_id}-{number}", []string{"customer_id", "number"}, ""},
		{"t:{a}:{b}:x", []string{"a", "b"}, ""},
		{"plain", nil, `key template "plain" names no field; use {field}`},
		{"{}", nil, `empty field {} in key template "{}"`},
		{"{a}}", []string{"a"}, `unbalanced '}' in key template "{a}}"`},
		{"{a{b}}", nil, `unclosed '{' in key template "{a{b}}"`},
	}
	for _, tt := range tests {
		got, err := KeyFields(tt.template)
		errText := ""
		if err != nil {
			errText = err.Error()
		}
		if diff := cmp.Diff(tt.want, got); diff != "" || errText != tt.err {
			t.Errorf("KeyFields(%q) = %v, %q; want %v, %q", tt.template, got, errText, tt.want, tt.err)
		}
	}
}

func TestStoreToolNames(t *testing.T) {
	if got := StoreToolName("support-tickets", "get"); got != "store__support_tickets__get" {
		t.Errorf("StoreToolName = %q", got)
	}
	store, action, ok := ParseStoreToolName("store__a__b__query")
	if store != "a__b" || action != "query" || !ok {
		t.Errorf("ParseStoreToolName = %q, %q, %v", store, action, ok)
	}
	if _, _, ok := ParseStoreToolName("triage"); ok {
		t.Error("ParseStoreToolName(triage) ok")
	}
}
