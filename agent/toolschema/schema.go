package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// base is the URL a schema is compiled under. Nothing is ever loaded from it: a relative $ref
// resolves against it to another mem:/// URL, which the locked loader refuses.
const base = "mem:///parameters.json"

// anyObject is the schema of a tool that declares no parameters (the tool.ts layout): the model is
// offered an object without properties, and any object is accepted.
var anyObject = json.RawMessage(`{"type":"object"}`)

// ErrExternalRef is wrapped by the error of Compile for a schema that refers outside itself.
var ErrExternalRef = errors.New("toolschema: $ref outside the schema")

// Schema is a compiled parameter schema. It is immutable and safe for concurrent use.
type Schema struct {
	sch *jsonschema.Schema
	doc any // the decoded schema: field names and descriptions for messages
}

// lockedLoader loads nothing: every URL the schema does not define itself is refused.
type lockedLoader struct{}

// Load implements jsonschema.URLLoader.
func (lockedLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%w: %s is not loaded", ErrExternalRef, strings.TrimPrefix(url, "mem:///"))
}

// Compile compiles raw, a JSON Schema (draft 2020-12 unless its $schema names another draft
// the library knows); an empty raw is any object. It never reads a file or the network: a $ref
// (or $dynamicRef) must point inside the schema ("#/$defs/name", "#/properties/a"), and a
// $schema must name a standard draft. A schema that is not valid gives a *SchemaError naming
// each place (its Problems' Path is inside the schema, such as "properties.a.type").
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = anyObject
	}
	doc, err := decode(raw)
	if err != nil {
		return nil, &SchemaError{Problems: []Problem{{Message: "is not JSON: " + err.Error()}}}
	}
	if probs := externalRefs(doc, doc, nil, nil); len(probs) > 0 {
		return nil, &SchemaError{Problems: probs, err: ErrExternalRef}
	}
	return compile(doc)
}

// compile compiles the decoded schema doc with the locked loader.
func compile(doc any) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(lockedLoader{})
	if err := c.AddResource(base, doc); err != nil {
		return nil, &SchemaError{Problems: []Problem{{Message: err.Error()}}}
	}
	sch, err := c.Compile(base)
	if err != nil {
		return nil, compileError(err, doc)
	}
	return &Schema{sch: sch, doc: doc}, nil
}

// Check validates args, the JSON text of a call's arguments (empty means {}). It returns nil
// when they match, else an *Error that names the field of each problem.
func (s *Schema) Check(args json.RawMessage) error {
	var v any
	if len(bytes.TrimSpace(args)) == 0 {
		v = map[string]any{}
	} else {
		var err error
		if v, err = decode(args); err != nil {
			return &Error{Problems: []Problem{{Message: "must be a JSON object: " + err.Error()}}}
		}
	}
	err := s.sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Problems: []Problem{{Message: err.Error()}}}
	}
	return &Error{Problems: describe(ve, v, s.doc)}
}

// decode reads one JSON value, numbers as json.Number (as the validator wants them).
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more JSON after the value")
	}
	return v, nil
}

// schemaMaps are the keywords whose value maps names to schemas: their keys are not keywords.
var schemaMaps = map[string]bool{
	"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
	"dependentSchemas": true, "dependencies": true,
}

// dataKeywords are the keywords whose value is data, not a schema: a "$ref" in it refers to nothing.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// externalRefs returns a problem for every $ref and $dynamicRef of v (at path in the schema root) that
// does not start with "#", and for a $schema that names no draft the library has built in.
// Paths are tokens, as in an instance location.
func externalRefs(root, v any, path []string, out []Problem) []Problem {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			val := x[k]
			at := append(path[:len(path):len(path)], k)
			switch {
			case dataKeywords[k]:
				continue
			case k == "$ref" || k == "$dynamicRef":
				if s, ok := val.(string); ok && !strings.HasPrefix(s, "#") {
					out = append(out, Problem{Path: pathOf(at, root), Message: fmt.Sprintf(
						"%q points outside the schema: a tool's parameters may refer only to themselves, such as \"#/$defs/name\"", s)})
				}
				continue
			case k == "$schema":
				if s, ok := val.(string); ok && !knownDraft(s) {
					out = append(out, Problem{Path: pathOf(at, root), Message: fmt.Sprintf(
						"%q is not a JSON Schema draft: use https://json-schema.org/draft/2020-12/schema, or leave $schema out", s)})
				}
				continue
			case schemaMaps[k]:
				if m, ok := val.(map[string]any); ok {
					for _, name := range sortedKeys(m) {
						out = externalRefs(root, m[name], append(at[:len(at):len(at)], name), out)
					}
					continue
				}
			}
			out = externalRefs(root, val, at, out)
		}
	case []any:
		for i, e := range x {
			out = externalRefs(root, e, append(path[:len(path):len(path)], fmt.Sprint(i)), out)
		}
	}
	return out
}

// knownDraft reports whether url is the meta-schema of a draft the library has built in.
func knownDraft(url string) bool {
	url = strings.TrimSuffix(url, "#")
	url = strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
	switch url {
	case "json-schema.org/schema", "json-schema.org/draft/2020-12/schema", "json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft-07/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-04/schema":
		return true
	}
	return false
}

// compileError turns an error of the compiler into a *SchemaError.
func compileError(err error, doc any) *SchemaError {
	var sv *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sv) && errors.As(sv.Err, &ve) {
		return &SchemaError{Problems: describe(ve, doc, nil)}
	}
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) {
		return &SchemaError{err: ErrExternalRef, Problems: []Problem{{Message: fmt.Sprintf(
			"refers to %s, outside the schema: a tool's parameters may refer only to themselves, such as \"#/$defs/name\"",
			strings.TrimPrefix(load.URL, "mem:///"))}}}
	}
	var re *jsonschema.InvalidRegexError
	if errors.As(err, &re) {
		return &SchemaError{Problems: []Problem{{Path: pathOf(pointer(re.URL), doc), Message: fmt.Sprintf(
			"%q is not a regular expression Go's regexp accepts: %v", re.Regex, re.Err)}}}
	}
	var anchor *jsonschema.AnchorNotFoundError
	if errors.As(err, &anchor) {
		return &SchemaError{Problems: []Problem{{Message: fmt.Sprintf("%q points to nothing in the schema", fragment(anchor.Reference))}}}
	}
	var ptr *jsonschema.JSONPointerNotFoundError
	if errors.As(err, &ptr) {
		return &SchemaError{Problems: []Problem{{Message: fmt.Sprintf("%q points to nothing in the schema", fragment(ptr.URL))}}}
	}
	return &SchemaError{Problems: []Problem{{Message: strings.ReplaceAll(err.Error(), base, "the schema")}}}
}

// fragment returns the "#..." part of url, or url when it has none.
func fragment(url string) string {
	if i := strings.IndexByte(url, '#'); i >= 0 {
		return url[i:]
	}
	return url
}

// pointer returns the tokens of the JSON pointer in url's fragment ("mem:///x#/a/b~1c": a, b/c).
func pointer(url string) []string {
	_, frag, ok := strings.Cut(url, "#")
	if !ok || frag == "" || frag == "/" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}
