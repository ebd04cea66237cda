package toolschema_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/agent/toolschema"
)

// refund is the parameters of support-desk's refund_request, with a few more keywords.
const refund = `{
  "type": "object",
  "properties": {
    "customer_id": {"type": "string", "description": "The customer's id."},
    "amount_eur": {"type": "number", "exclusiveMinimum": 0},
    "reason": {"type": "string", "minLength": 3},
    "channel": {"enum": ["email", "phone"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"], "additionalProperties": false}},
    "note": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}]},
    "code": {"$ref": "#/$defs/code"}
  },
  "required": ["customer_id", "amount_eur", "reason"],
  "additionalProperties": false,
  "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}}
}`

func mustCompile(t testing.TB, raw string) *toolschema.Schema {
	t.Helper()
	s, err := toolschema.Compile(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func TestCheck(t *testing.T) {
	s := mustCompile(t, refund)
	tests := []struct {
		name, args string
		want       string // "" for valid
	}{
		{"valid", `{"customer_id":"c1","amount_eur":12.5,"reason":"broken"}`, ""},
		{"valid with everything", `{"customer_id":"c1","amount_eur":1,"reason":"late","channel":"email","tags":["a"],"lines":[{"sku":"x"}],"note":{"text":"hi"},"code":"ABC"}`, ""},
		{"missing required", `{"customer_id":"c1","amount_eur":3}`, "reason: required"},
		{"missing required with description", `{"amount_eur":3,"reason":"why"}`, "customer_id: required (The customer's id)"},
		{"wrong type", `{"customer_id":"c1","amount_eur":"12","reason":"why"}`, "amount_eur: must be a number, got string"},
		{"unknown enum value", `{"customer_id":"c1","amount_eur":1,"reason":"why","channel":"fax"}`, `channel: must be one of "email", "phone"; got "fax"`},
		{"unknown field", `{"customer_id":"c1","amount_eur":1,"reason":"why","extra":true}`,
			"extra: unknown field (known: amount_eur, channel, code, customer_id, lines, note, reason, tags)"},
		{"nested in an array", `{"customer_id":"c1","amount_eur":1,"reason":"why","lines":[{"sku":"a"},{"qty":2}]}`,
			"lines[1].qty: unknown field (known: sku); lines[1].sku: required"},
		{"bounds", `{"customer_id":"c1","amount_eur":0,"reason":"no","tags":["a","b","c"]}`,
			"amount_eur: must be greater than 0, got 0; reason: must be at least 3 characters long, got 2; tags: must have at most 2 items, got 3"},
		{"through a $ref", `{"customer_id":"c1","amount_eur":1,"reason":"why","code":"abc"}`, `code: must match the pattern ^[A-Z]{3}$; got "abc"`},
		{"anyOf, the branch of the right type", `{"customer_id":"c1","amount_eur":1,"reason":"why","note":{}}`, "note.text: required"},
		{"anyOf, no branch of the type", `{"customer_id":"c1","amount_eur":1,"reason":"why","note":3}`, "note: must be an object or a string, got number"},
		{"every problem", `{"amount_eur":"x"}`, "amount_eur: must be a number, got string; customer_id: required (The customer's id); reason: required"},
		{"not an object", `[1]`, "arguments: must be an object, got array"},
		{"not JSON", `{"customer_id":`, "arguments: must be a JSON object: unexpected EOF"},
		{"two values", `{} {}`, "arguments: must be a JSON object: more JSON after the value"},
		{"empty is {}", ``, "amount_eur: required; customer_id: required (The customer's id); reason: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Check(json.RawMessage(tt.args))
			got := ""
			if err != nil {
				got = err.Error()
				var se *toolschema.Error
				if !errors.As(err, &se) {
					t.Errorf("error %T is not a *toolschema.Error", err)
				}
			}
			if got != tt.want {
				t.Errorf("Check(%s) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestCheckProblems(t *testing.T) {
	s := mustCompile(t, refund)
	err := s.Check(json.RawMessage(`{"customer_id":5,"amount_eur":1}`))
	var se *toolschema.Error
	if !errors.As(err, &se) {
		t.Fatalf("Check = %v, want a *toolschema.Error", err)
	}
	want := []toolschema.Problem{
		{Path: "customer_id", Message: "must be a string, got number"},
		{Path: "reason", Message: "required"},
	}
	if diff := cmp.Diff(want, se.Problems); diff != "" {
		t.Errorf("Problems (-want +got):\n%s", diff)
	}
}

func TestCheckManyProblemsAreCut(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"}}}}`)
	items := strings.Repeat("1,", 199) + "1"
	err := s.Check(json.RawMessage(`{"l":[` + items + `]}`))
	var se *toolschema.Error
	if !errors.As(err, &se) {
		t.Fatalf("Check = %v", err)
	}
	if len(se.Problems) != 50 {
		t.Errorf("len(Problems) = %d, want 50", len(se.Problems))
	}
	if msg := err.Error(); !strings.HasSuffix(msg, "; and 40 more") || strings.Count(msg, "must be a string") != 10 {
		t.Errorf("Error() = %q, want 10 problems and a count of the rest", msg)
	}
}

// TestCheckConcurrent: one compiled schema serves the parallel calls of a model turn (go test -race).
func TestCheckConcurrent(t *testing.T) {
	s := mustCompile(t, refund)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				if i%2 == 0 {
					if err := s.Check(json.RawMessage(`{"customer_id":"c1","amount_eur":1,"reason":"why"}`)); err != nil {
						t.Error(err)
						return
					}
				} else if err := s.Check(json.RawMessage(`{"amount_eur":"1"}`)); err == nil {
					t.Error("no error")
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCompileEmptyIsAnyObject(t *testing.T) {
	s := mustCompile(t, "")
	if err := s.Check(json.RawMessage(`{"anything":[1,2]}`)); err != nil {
		t.Errorf("Check(object) = %v, want nil", err)
	}
	if err := s.Check(json.RawMessage(`"text"`)); err == nil {
		t.Error("Check(string) = nil, want an error")
	}
}

func TestCompileRefusals(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, schema string
		want         string
		external     bool
	}{
		{"not JSON", `{"type":`, "schema: is not JSON: unexpected EOF", false},
		{"unknown type", `{"type":"object","properties":{"a":{"type":"strin"}}}`,
			`properties.a.type: must be one of "array", "boolean", "integer", "null", "number", "object", "string"; got "strin"`, false},
		{"keyword of the wrong type", `{"type":"object","required":"a"}`, "required: must be an array, got string", false},
		{"relative $ref", `{"type":"object","properties":{"a":{"$ref":"other.json"}}}`,
			`properties.a.$ref: "other.json" points outside the schema: a tool's parameters may refer only to themselves, such as "#/$defs/name"`, true},
		{"file $ref", `{"type":"object","properties":{"a":{"$ref":"file://` + secret + `"}}}`,
			`properties.a.$ref: "file://` + secret + `" points outside the schema: a tool's parameters may refer only to themselves, such as "#/$defs/name"`, true},
		{"http $ref in $defs", `{"type":"object","$defs":{"x":{"items":[{"$ref":"http://127.0.0.1:1/s.json"}]}}}`,
			`$defs.x.items[0].$ref: "http://127.0.0.1:1/s.json" points outside the schema: a tool's parameters may refer only to themselves, such as "#/$defs/name"`, true},
		{"$dynamicRef", `{"type":"object","properties":{"a":{"$dynamicRef":"https://example.com/s#node"}}}`,
			`properties.a.$dynamicRef: "https://example.com/s#node" points outside the schema: a tool's parameters may refer only to themselves, such as "#/$defs/name"`, true},
		{"custom meta-schema", `{"$schema":"http://example.com/meta","type":"object"}`,
			`$schema: "http://example.com/meta" is not a JSON Schema draft: use https://json-schema.org/draft/2020-12/schema, or leave $schema out`, true},
		{"$ref relative to an $id", `{"$id":"http://example.com/root.json","type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`,
			`"#/$defs/missing" points to nothing in the schema`, false},
		{"$ref to nothing", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`,
			`schema: "#/$defs/missing" points to nothing in the schema`, false},
		{"bad pattern", `{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=x)y"}}}`,
			"properties.a.pattern: ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := toolschema.Compile(json.RawMessage(tt.schema))
			var se *toolschema.SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("Compile = %v, want a *toolschema.SchemaError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compile error = %q, want it to contain %q", err, tt.want)
			}
			if got := errors.Is(err, toolschema.ErrExternalRef); got != tt.external {
				t.Errorf("errors.Is(err, ErrExternalRef) = %v, want %v", got, tt.external)
			}
		})
	}
}

// TestCompileAcceptsDataThatLooksLikeARef: a "$ref" inside enum, const, default or examples is
// data, and a property may be called "$ref" or "enum".
func TestCompileAcceptsDataThatLooksLikeARef(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
		"$ref":{"type":"string"},
		"enum":{"type":"object","default":{"$ref":"http://example.com/x"}},
		"v":{"enum":[{"$ref":"file:///etc/passwd"}]}
	}}`)
	if err := s.Check(json.RawMessage(`{"$ref":"x","v":{"$ref":"file:///etc/passwd"}}`)); err != nil {
		t.Errorf("Check = %v, want nil", err)
	}
}

func BenchmarkCheck(b *testing.B) {
	s := mustCompile(b, refund)
	args := json.RawMessage(`{"customer_id":"c1","amount_eur":12.5,"reason":"broken on arrival","channel":"email"}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Check(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckRefused(b *testing.B) {
	s := mustCompile(b, refund)
	args := json.RawMessage(`{"customer_id":"c1","amount_eur":"12.5","channel":"fax"}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Check(args); err == nil {
			b.Fatal("no error")
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	raw := json.RawMessage(refund)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := toolschema.Compile(raw); err != nil {
			b.Fatal(err)
		}
	}
}
