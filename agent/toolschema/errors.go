package toolschema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Limits of the problems of one error.
const (
	maxProblems    = 50  // kept in Problems
	shownProblems  = 10  // written by Error
	maxDescription = 120 // bytes of a property's description quoted after "required"
)

// Problem is one thing wrong, at one place.
type Problem struct {
	// Path names the field: "subject", "options[0].value", "where.status"; "" is the whole
	// value (the arguments, or the schema).
	Path    string
	Message string
}

// String is "path: message".
func (p Problem) String() string { return p.Path + ": " + p.Message }

// Error is a call's arguments refused by the schema: every problem, sorted by path.
type Error struct {
	Problems []Problem
}

// Error lists the problems, "subject: required; amount_eur: must be a number, got string"; a
// problem of the whole value is written "arguments: ...".
func (e *Error) Error() string { return join(e.Problems, "arguments") }

// SchemaError is a parameter schema Compile refused: every problem, with its path inside the
// schema ("properties.a.type").
type SchemaError struct {
	Problems []Problem
	err      error // ErrExternalRef, or nil
}

// Error lists the problems; a problem of the whole schema is written "schema: ...".
func (e *SchemaError) Error() string { return join(e.Problems, "schema") }

// Unwrap returns ErrExternalRef for a schema refused because it refers outside itself.
func (e *SchemaError) Unwrap() error { return e.err }

func join(probs []Problem, root string) string {
	var b strings.Builder
	for i, p := range probs {
		if i == shownProblems {
			fmt.Fprintf(&b, "; and %d more", len(probs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(cmp.Or(p.Path, root))
		b.WriteString(": ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// problem is a Problem with what alternatives needs to rank it.
type problem struct {
	Problem
	typeAt string // for a type mismatch: the instance location, as a key; else ""
	depth  int    // the length of the instance location
}

// describer turns the tree of a validation error into problems.
type describer struct {
	inst any // the value validated
	doc  any // the schema, for field names and descriptions; nil when unknown
	out  []problem
}

// describe returns the problems of ve, which validated inst against the schema doc (nil when
// inst is itself the schema being checked against the meta-schema), sorted and without repeats.
func describe(ve *jsonschema.ValidationError, inst, doc any) []Problem {
	d := &describer{inst: inst, doc: doc}
	d.walk(ve)
	slices.SortStableFunc(d.out, func(a, b problem) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Message, b.Message))
	})
	d.out = slices.CompactFunc(d.out, func(a, b problem) bool { return a.Problem == b.Problem })
	probs := make([]Problem, 0, min(len(d.out), maxProblems))
	for _, p := range d.out[:min(len(d.out), maxProblems)] {
		probs = append(probs, p.Problem)
	}
	return probs
}

func (d *describer) add(loc []string, msg string, typeAt string) {
	if len(d.out) >= 4*maxProblems { // enough: the rest is cut anyway
		return
	}
	d.out = append(d.out, problem{Problem: Problem{Path: pathOf(loc, d.inst), Message: msg}, typeAt: typeAt, depth: len(loc)})
}

// walk adds the problems of e: the leaves of its tree, except that alternatives (anyOf, oneOf)
// are judged together.
func (d *describer) walk(e *jsonschema.ValidationError) {
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf:
		d.alternatives(e)
		return
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			d.alternatives(e)
			return
		}
	case *kind.Contains, *kind.PropertyNames, *kind.Not:
		d.leaf(e)
		return
	}
	if len(e.Causes) == 0 {
		d.leaf(e)
		return
	}
	for _, c := range e.Causes {
		d.walk(c)
	}
}

// alternatives describes an anyOf or oneOf that nothing matched. The alternatives whose type
// did not even match are set aside: when one alternative is left, its problems are the ones
// meant; when none is, the value has the wrong type. Of several left, one whose problems all lie
// inside the value (it got furthest) is the one meant; otherwise the value matches none of them.
func (d *describer) alternatives(e *jsonschema.ValidationError) {
	at := strings.Join(e.InstanceLocation, "\x00")
	var kept [][]problem
	var wants []string
	got := ""
	for _, c := range e.Causes {
		sub := &describer{inst: d.inst, doc: d.doc}
		sub.walk(c)
		wrongType := len(sub.out) > 0
		for _, p := range sub.out {
			if p.typeAt != at {
				wrongType = false
				break
			}
		}
		if !wrongType {
			kept = append(kept, sub.out)
			continue
		}
		if t, ok := c.ErrorKind.(*kind.Type); ok {
			wants, got = append(wants, t.Want...), t.Got
		} else {
			for _, leaf := range leaves(c) {
				if t, ok := leaf.ErrorKind.(*kind.Type); ok {
					wants, got = append(wants, t.Want...), t.Got
				}
			}
		}
	}
	if len(kept) > 1 {
		var deeper [][]problem
		for _, probs := range kept {
			if !slices.ContainsFunc(probs, func(p problem) bool { return p.depth <= len(e.InstanceLocation) }) {
				deeper = append(deeper, probs)
			}
		}
		if len(deeper) == 1 {
			kept = deeper
		}
	}
	switch {
	case len(kept) == 1:
		d.out = append(d.out, kept[0]...)
	case len(kept) == 0 && len(wants) > 0:
		slices.Sort(wants)
		d.add(e.InstanceLocation, "must be "+typeList(slices.Compact(wants))+", got "+got, at)
	default:
		var alts []string
		for _, probs := range kept {
			if len(probs) > 0 {
				alts = append(alts, probs[0].String())
			}
		}
		msg := "matches none of the allowed forms"
		if len(alts) > 0 {
			msg += " (" + strings.Join(alts, "; or ") + ")"
		}
		d.add(e.InstanceLocation, msg, "")
	}
}

// leaves returns the errors without causes under e.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// english writes the library's own messages, for the kinds leaf does not word itself.
var english = message.NewPrinter(language.English)

// leaf adds the problem of one failed keyword.
func (d *describer) leaf(e *jsonschema.ValidationError) {
	loc := e.InstanceLocation
	child := func(name string) []string { return append(loc[:len(loc):len(loc)], name) }
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			d.add(child(m), "required"+d.description(e.SchemaURL, m), "")
		}
	case *kind.DependentRequired:
		for _, m := range k.Missing {
			d.add(child(m), "required when "+k.Prop+" is given", "")
		}
	case *kind.Dependency:
		for _, m := range k.Missing {
			d.add(child(m), "required when "+k.Prop+" is given", "")
		}
	case *kind.AdditionalProperties:
		known := d.fieldNames(e.SchemaURL)
		msg := "unknown field"
		if len(known) > 0 {
			msg += " (known: " + strings.Join(known, ", ") + ")"
		} else {
			msg += " (none is allowed here)"
		}
		for _, p := range k.Properties {
			d.add(child(p), msg, "")
		}
	case *kind.Type:
		d.add(loc, "must be "+typeList(k.Want)+", got "+k.Got, strings.Join(loc, "\x00"))
	case *kind.Enum:
		vals := make([]string, len(k.Want))
		for i, v := range k.Want {
			vals[i] = show(v)
		}
		if len(vals) == 1 {
			d.add(loc, "must be "+vals[0]+"; got "+show(k.Got), "")
		} else {
			d.add(loc, "must be one of "+strings.Join(vals, ", ")+"; got "+show(k.Got), "")
		}
	case *kind.Const:
		d.add(loc, "must be "+show(k.Want)+"; got "+show(k.Got), "")
	case *kind.MinLength:
		d.add(loc, fmt.Sprintf("must be at least %s long, got %d", count(k.Want, "character"), k.Got), "")
	case *kind.MaxLength:
		d.add(loc, fmt.Sprintf("must be at most %s long, got %d", count(k.Want, "character"), k.Got), "")
	case *kind.MinItems:
		d.add(loc, fmt.Sprintf("must have at least %s, got %d", count(k.Want, "item"), k.Got), "")
	case *kind.MaxItems:
		d.add(loc, fmt.Sprintf("must have at most %s, got %d", count(k.Want, "item"), k.Got), "")
	case *kind.MinProperties:
		d.add(loc, fmt.Sprintf("must have at least %s, got %d", count(k.Want, "field"), k.Got), "")
	case *kind.MaxProperties:
		d.add(loc, fmt.Sprintf("must have at most %s, got %d", count(k.Want, "field"), k.Got), "")
	case *kind.Minimum:
		d.add(loc, "must be at least "+rat(k.Want)+", got "+rat(k.Got), "")
	case *kind.Maximum:
		d.add(loc, "must be at most "+rat(k.Want)+", got "+rat(k.Got), "")
	case *kind.ExclusiveMinimum:
		d.add(loc, "must be greater than "+rat(k.Want)+", got "+rat(k.Got), "")
	case *kind.ExclusiveMaximum:
		d.add(loc, "must be less than "+rat(k.Want)+", got "+rat(k.Got), "")
	case *kind.MultipleOf:
		d.add(loc, "must be a multiple of "+rat(k.Want)+", got "+rat(k.Got), "")
	case *kind.Pattern:
		d.add(loc, "must match the pattern "+k.Want+"; got "+show(k.Got), "")
	case *kind.Format:
		d.add(loc, "must be a valid "+k.Want+"; got "+show(k.Got), "")
	case *kind.UniqueItems:
		d.add(loc, fmt.Sprintf("must not repeat items: items %d and %d are equal", k.Duplicates[0], k.Duplicates[1]), "")
	case *kind.PropertyNames:
		d.add(child(k.Property), "is not an allowed field name", "")
	case *kind.FalseSchema:
		d.add(loc, "is not allowed", "")
	case *kind.Not:
		d.add(loc, "is not allowed: it matches the schema under \"not\"", "")
	case *kind.Contains:
		d.add(loc, "must contain at least one item of the schema under \"contains\"", "")
	case *kind.OneOf:
		d.add(loc, fmt.Sprintf("matches more than one of the allowed forms (%d and %d); it must match exactly one", k.Subschemas[0], k.Subschemas[1]), "")
	default:
		d.add(loc, e.ErrorKind.LocalizedString(english), "")
	}
}

// at returns the object of the schema at the fragment of url (a location in this schema), or nil.
func (d *describer) at(url string) map[string]any {
	if d.doc == nil || !strings.HasPrefix(url, base+"#") {
		return nil
	}
	v := d.doc
	for _, t := range pointer(url) {
		switch x := v.(type) {
		case map[string]any:
			v = x[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	m, _ := v.(map[string]any)
	return m
}

// fieldNames returns the names of the properties of the object schema at url, sorted.
func (d *describer) fieldNames(url string) []string {
	props, _ := d.at(url)["properties"].(map[string]any)
	return slices.Sorted(maps.Keys(props))
}

// description returns " (<description>)" of property name of the object schema at url, when
// it has a short one, else "".
func (d *describer) description(url, name string) string {
	props, _ := d.at(url)["properties"].(map[string]any)
	prop, _ := props[name].(map[string]any)
	desc, _ := prop["description"].(string)
	desc = strings.TrimSpace(desc)
	if desc == "" || len(desc) > maxDescription || strings.ContainsAny(desc, "\n\r") {
		return ""
	}
	return " (" + strings.TrimSuffix(desc, ".") + ")"
}

// pathOf writes an instance location: "a.b", "items[2].name". An index token is written in
// brackets when the value at that place (in inst) is an array.
func pathOf(loc []string, inst any) string {
	var b strings.Builder
	v := inst
	for _, t := range loc {
		arr, isArr := v.([]any)
		i, err := strconv.Atoi(t)
		switch {
		case err == nil && i >= 0 && isArr:
			fmt.Fprintf(&b, "[%d]", i)
			if isArr && i < len(arr) {
				v = arr[i]
			} else {
				v = nil
			}
			continue
		case b.Len() > 0:
			b.WriteByte('.')
		}
		b.WriteString(t)
		if m, ok := v.(map[string]any); ok {
			v = m[t]
		} else {
			v = nil
		}
	}
	return b.String()
}

// typeList writes JSON types for "must be ...": "a number", "a string or null".
func typeList(types []string) string {
	words := make([]string, len(types))
	for i, t := range types {
		switch t {
		case "null":
			words[i] = "null"
		case "integer", "object", "array":
			words[i] = "an " + t
		default:
			words[i] = "a " + t
		}
	}
	return strings.Join(words, " or ")
}

// show writes a value as JSON, cut when long.
func show(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > 60 {
		switch v.(type) {
		case map[string]any:
			return "an object"
		case []any:
			return "an array"
		}
		return string(b[:57]) + "..."
	}
	return string(b)
}

// count writes "1 item", "3 items".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// rat writes a number of the validator exactly: "3", "0.5".
func rat(r interface{ RatString() string }) string {
	s := r.RatString()
	if num, den, ok := strings.Cut(s, "/"); ok {
		n, err1 := strconv.ParseFloat(num, 64)
		d, err2 := strconv.ParseFloat(den, 64)
		if err1 == nil && err2 == nil && d != 0 {
			return strconv.FormatFloat(n/d, 'g', -1, 64)
		}
	}
	return s
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
