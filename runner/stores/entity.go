package stores

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"svc/agent"
)

// FieldError is input refused because of one field: a field of a record, "key", "limit", or
// "where.<field>" of a query. Field is "" for the input as a whole. It wraps ErrInvalid.
type FieldError struct {
	Field   string
	Problem string
}

// Error names the field and says what is wrong with it.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Problem)
}

// Unwrap makes every FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Field types of a store entity (agent.StoreField.Type).
const (
	typeString  = "string"
	typeInteger = "integer"
	typeNumber  = "number"
	typeBoolean = "boolean"
	typeEnum    = "enum"
	typeObject  = "object"
	typeArray   = "array"
)

// entity is a store definition prepared for checking records: its key template split into
// literal text and fields, and its field names in order.
type entity struct {
	store  string
	def    *agent.Store
	key    []keyPart // the key template, in order
	keyOf  map[string]bool
	keys   []string // the fields of the key template, in template order, without repeats
	fields []string // every field of the schema, sorted
}

// keyPart is literal text of a key template, or a field when field is set.
type keyPart struct {
	text  string
	field string
}

// newEntity prepares def; it fails when the key template cannot be rendered (a tree the
// build validated never does).
func newEntity(store string, def *agent.Store) (*entity, error) {
	e := &entity{store: store, def: def, keyOf: map[string]bool{}}
	for name := range def.Entity.Schema {
		e.fields = append(e.fields, name)
	}
	slices.Sort(e.fields)
	if _, err := agent.KeyFields(def.Entity.Key); err != nil {
		return nil, fmt.Errorf("store %q: entity.key: %w", store, err)
	}
	rest := def.Entity.Key
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			e.key = append(e.key, keyPart{text: rest})
			break
		}
		if open > 0 {
			e.key = append(e.key, keyPart{text: rest[:open]})
		}
		end := strings.IndexByte(rest, '}') // after open: KeyFields checked the braces
		name := rest[open+1 : end]
		if _, ok := def.Entity.Schema[name]; !ok {
			return nil, fmt.Errorf("store %q: entity.key: {%s} is not a field of entity.schema", store, name)
		}
		e.key = append(e.key, keyPart{field: name})
		if !e.keyOf[name] {
			e.keyOf[name] = true
			e.keys = append(e.keys, name)
		}
		rest = rest[end+1:]
	}
	return e, nil
}

// record checks the fields of a record to set (a JSON object) against the schema and returns
// its key and its value in canonical form (compact JSON, keys sorted, integers without a
// fraction). Every problem is reported, each as a *FieldError.
func (e *entity) record(raw json.RawMessage) (key string, value json.RawMessage, err error) {
	obj, err := decodeObject(raw)
	if err != nil {
		return "", nil, err
	}
	var errs []error
	for _, name := range sortedKeys(obj) {
		f, ok := e.def.Entity.Schema[name]
		if !ok {
			errs = append(errs, fieldErr(name, "unknown field; %s has the fields %s", e.def.Entity.Name, strings.Join(e.fields, ", ")))
			continue
		}
		v, err := checkValue(name, f, obj[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		obj[name] = v
	}
	for _, name := range e.keys {
		if _, ok := obj[name]; !ok {
			errs = append(errs, fieldErr(name, "missing; it is part of the key %q", e.def.Entity.Key))
		}
	}
	if len(errs) > 0 {
		return "", nil, errors.Join(errs...)
	}
	key, err = e.renderKey(obj)
	if err != nil {
		return "", nil, err
	}
	value, err = encodeJSON(obj)
	if err != nil {
		return "", nil, fmt.Errorf("encode record: %w", err)
	}
	if len(value) > MaxValueBytes {
		return "", nil, fieldErr("", "the record is %d bytes as JSON; a record holds at most %d", len(value), MaxValueBytes)
	}
	return key, value, nil
}

// renderKey renders the key template with the checked values of obj.
func (e *entity) renderKey(obj map[string]any) (string, error) {
	var b strings.Builder
	for _, p := range e.key {
		if p.field == "" {
			b.WriteString(p.text)
			continue
		}
		var s string
		switch v := obj[p.field].(type) {
		case string:
			if v == "" {
				return "", fieldErr(p.field, "must not be empty: it is part of the key %q", e.def.Entity.Key)
			}
			s = v
		case json.Number:
			s = v.String()
			if e.def.Entity.Schema[p.field].Type == typeNumber {
				f, _ := v.Float64() // checked by checkValue
				s = strconv.FormatFloat(f, 'f', -1, 64)
			}
		case bool:
			s = strconv.FormatBool(v)
		default: // object or array: its canonical JSON
			enc, err := encodeJSON(v)
			if err != nil {
				return "", fmt.Errorf("encode key field %q: %w", p.field, err)
			}
			s = string(enc)
		}
		b.WriteString(s)
	}
	key := b.String()
	if p := keyProblem(key); p != "" {
		return "", fieldErr("key", "the key rendered from %q %s", e.def.Entity.Key, p)
	}
	return key, nil
}

// filters checks the conditions of a query: each names a field of the schema of a type that
// compares by equality, with a value of that type.
func (e *entity) filters(where map[string]any) ([]Filter, error) {
	var out []Filter
	var errs []error
	for _, name := range sortedKeys(where) {
		field := "where." + name
		f, ok := e.def.Entity.Schema[name]
		if !ok {
			errs = append(errs, fieldErr(field, "unknown field; %s has the fields %s", e.def.Entity.Name, strings.Join(e.fields, ", ")))
			continue
		}
		if f.Type == typeObject || f.Type == typeArray {
			errs = append(errs, fieldErr(field, "is of type %s; where compares string, integer, number, boolean and enum fields only", f.Type))
			continue
		}
		v, err := checkValue(field, f, goValue(where[name]))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var fv any
		switch x := v.(type) {
		case json.Number:
			if f.Type == typeInteger {
				fv, _ = x.Int64() // checkValue made it an integer in range
			} else {
				fv, _ = x.Float64()
			}
		default:
			fv = x
		}
		out = append(out, Filter{Field: name, Value: fv})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// goValue turns the numbers of a Go caller into the json.Number of decoded JSON.
func goValue(v any) any {
	switch x := v.(type) {
	case int:
		return json.Number(strconv.Itoa(x))
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64))
	}
	return v
}

// checkValue checks one decoded JSON value (json.Number for numbers) against its field and
// returns it in canonical form.
func checkValue(name string, f agent.StoreField, v any) (any, error) {
	switch f.Type {
	case typeString, typeEnum:
		s, ok := v.(string)
		if !ok {
			return nil, fieldErr(name, "must be a string, got %s", describe(v))
		}
		if f.Type == typeEnum && !slices.Contains(f.Values, s) {
			return nil, fieldErr(name, "must be one of %s; got %q", strings.Join(f.Values, ", "), s)
		}
		if err := checkText(s); err != "" {
			return nil, fieldErr(name, "%s", err)
		}
		return s, nil
	case typeInteger:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fieldErr(name, "must be an integer, got %s", describe(v))
		}
		if i, err := n.Int64(); err == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		fl, err := n.Float64()
		if err != nil || fl != math.Trunc(fl) || fl < math.MinInt64 || fl >= math.MaxInt64 {
			return nil, fieldErr(name, "must be an integer (64-bit), got %s", n)
		}
		return json.Number(strconv.FormatInt(int64(fl), 10)), nil
	case typeNumber:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fieldErr(name, "must be a number, got %s", describe(v))
		}
		if _, err := n.Float64(); err != nil {
			return nil, fieldErr(name, "must be a number within the range of a 64-bit float, got %s", n)
		}
		return n, nil
	case typeBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, fieldErr(name, "must be true or false, got %s", describe(v))
		}
		return b, nil
	case typeObject:
		if _, ok := v.(map[string]any); !ok {
			return nil, fieldErr(name, "must be an object, got %s", describe(v))
		}
	case typeArray:
		if _, ok := v.([]any); !ok {
			return nil, fieldErr(name, "must be an array, got %s", describe(v))
		}
	default:
		return nil, fieldErr(name, "has type %q, which stores do not know", f.Type)
	}
	if path, problem := checkNested(v); problem != "" {
		return nil, fieldErr(name+path, "%s", problem)
	}
	return v, nil
}

// checkNested finds text inside an object or array that no backend can keep; it returns the
// path below the field and the problem.
func checkNested(v any) (path, problem string) {
	switch x := v.(type) {
	case string:
		return "", checkText(x)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if p := checkText(k); p != "" {
				return "." + k, "name " + p
			}
			if path, problem := checkNested(x[k]); problem != "" {
				return "." + k + path, problem
			}
		}
	case []any:
		for i, e := range x {
			if path, problem := checkNested(e); problem != "" {
				return "[" + strconv.Itoa(i) + "]" + path, problem
			}
		}
	}
	return "", ""
}

// checkText refuses text that Postgres cannot store (NUL) and that is not UTF-8.
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8 text"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "must not contain the NUL character (\\u0000)"
	}
	return ""
}

// checkKey checks a key given by a caller.
func checkKey(key string) error {
	if p := keyProblem(key); p != "" {
		return fieldErr("key", "%s", p)
	}
	return nil
}

// keyProblem says what is wrong with a key, or "".
func keyProblem(key string) string {
	switch {
	case key == "":
		return "must not be empty"
	case len(key) > MaxKeyBytes:
		return fmt.Sprintf("is %d bytes; a key has at most %d", len(key), MaxKeyBytes)
	}
	return checkText(key)
}

// describe names the JSON type of a decoded value, with the value when it is short.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			return "a string"
		}
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + x.String()
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}

// decodeObject decodes a JSON object, numbers as json.Number.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fieldErr("", "the record must be a JSON object of the entity's fields")
	}
	if dec.More() {
		return nil, fieldErr("", "the record must be one JSON object; found more after it")
	}
	return obj, nil
}

// encodeJSON is json.Marshal without HTML escaping: values keep <, > and & as written.
// Object keys come out sorted, so equal values encode equally.
func encodeJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonical re-encodes a stored JSON value in the form encodeJSON gives (a database may hand
// it back with other spacing or key order).
func canonical(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return encodeJSON(v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
