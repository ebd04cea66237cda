package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The agent files are decoded strictly: every unknown field, wrong type and duplicate key is reported
// at once, each with its line. encoding/json stops at the first problem and does not give lines for
// unknown fields, so the file is first read into a tree of positioned nodes (jsonNode) with the
// standard tokenizer, then copied into the Go value by reflection (jsonDecoder).

type jsonKind int

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonObject
	jsonArray
)

// jsonNode is one JSON value with the line where it starts and its raw bytes.
type jsonNode struct {
	kind    jsonKind
	line    int
	boolean bool
	text    string // string value, or the number literal
	members []jsonMember
	elems   []*jsonNode
	raw     []byte
}

// jsonMember is one key of an object, with the line of the key.
type jsonMember struct {
	key  string
	line int
	val  *jsonNode
}

// jsonDoc is a decoded file: the lines of its fields by path ("ci.deploy.branches[1]").
type jsonDoc struct {
	lines map[string]int
	bad   map[string]bool // paths whose value had the wrong type (already reported)
}

// line returns the line of the value at path, or 0 when the path is absent.
func (d *jsonDoc) line(path string) int {
	if d == nil {
		return 0
	}
	return d.lines[path]
}

// lineOr returns the line at path, else the line at the nearest present ancestor path, else 0.
func (d *jsonDoc) lineOr(paths ...string) int {
	for _, p := range paths {
		if l := d.line(p); l > 0 {
			return l
		}
	}
	return 0
}

// require records a problem when a required field is empty: "missing" (at the line of the enclosing
// object) when absent, "must not be empty" when present, nothing when its wrong type was already reported. hint is appended when set.
func (d *jsonDoc) require(c *collector, file, path string, empty bool, hint string) {
	if !empty || d.bad[path] {
		return
	}
	if hint != "" {
		hint = " (" + hint + ")"
	}
	if line := d.line(path); line > 0 {
		c.add(file, line, "field %q must not be empty%s", path, hint)
		return
	}
	c.add(file, d.parentLine(path), "missing required field %q%s", path, hint)
}

// parentLine returns the line of the closest enclosing field of path that is present, else 0.
func (d *jsonDoc) parentLine(path string) int {
	for {
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			return 0
		}
		path = path[:i]
		if line := d.line(path); line > 0 {
			return line
		}
	}
}

// lineIssue is one problem found while decoding, at a line (0 when none applies).
type lineIssue struct {
	line    int
	message string
}

// lineIndex converts byte offsets to 1-based line numbers.
type lineIndex []int // offsets of '\n'

func newLineIndex(data []byte) lineIndex {
	var idx lineIndex
	for i, c := range data {
		if c == '\n' {
			idx = append(idx, i)
		}
	}
	return idx
}

func (idx lineIndex) line(offset int64) int {
	return sort.Search(len(idx), func(i int) bool { return int64(idx[i]) >= offset }) + 1
}

// decodeJSONStrict decodes data into v (a pointer to one of the model types). It returns the
// positions of the fields and every problem; v holds whatever could be decoded.
func decodeJSONStrict(data []byte, v any) (*jsonDoc, []lineIssue) {
	doc := &jsonDoc{lines: map[string]int{}, bad: map[string]bool{}}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) {
		return doc, []lineIssue{{message: "not valid UTF-8"}}
	}
	root, issue := parseJSONTree(data)
	if issue != nil {
		return doc, []lineIssue{*issue}
	}
	d := &jsonDecoder{doc: doc}
	if root.kind != jsonObject {
		return doc, []lineIssue{{line: root.line, message: "must be a JSON object, got " + root.kind.String()}}
	}
	d.decode(root, reflect.ValueOf(v).Elem(), "")
	return doc, d.issues
}

// parseJSONTree reads one JSON value (and nothing after it) into a positioned tree.
func parseJSONTree(data []byte) (*jsonNode, *lineIssue) {
	p := &jsonParser{data: data, dec: json.NewDecoder(bytes.NewReader(data)), lines: newLineIndex(data)}
	p.dec.UseNumber()
	root, err := p.value()
	if err == nil {
		switch _, extra := p.dec.Token(); {
		case extra == nil:
			err = errTrailing
		case extra != io.EOF:
			err = extra
		}
	}
	if err != nil {
		return nil, p.issue(err)
	}
	return root, nil
}

var errTrailing = errors.New("trailing data")

type jsonParser struct {
	data  []byte
	dec   *json.Decoder
	lines lineIndex
	depth int
}

// maxJSONDepth bounds the nesting of agent JSON files, so a hostile file cannot exhaust the stack.
const maxJSONDepth = 100

var errTooDeep = fmt.Errorf("nested deeper than %d levels", maxJSONDepth)

func (p *jsonParser) issue(err error) *lineIssue {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return &lineIssue{line: p.lines.line(syn.Offset), message: "invalid JSON: " + syn.Error()}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &lineIssue{line: p.lines.line(int64(len(p.data))), message: "invalid JSON: unexpected end of file"}
	case errors.Is(err, errTrailing):
		return &lineIssue{line: p.lines.line(p.dec.InputOffset()), message: "invalid JSON: unexpected data after the JSON value"}
	default:
		return &lineIssue{line: p.lines.line(p.dec.InputOffset()), message: "invalid JSON: " + err.Error()}
	}
}

// start returns the offset where the token that ends at the decoder's current offset began,
// scanning forward from before (the offset before the token was read).
func (p *jsonParser) start(before int64) int64 {
	i := before
	for i < int64(len(p.data)) {
		switch p.data[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
			continue
		}
		break
	}
	return i
}

func (p *jsonParser) value() (*jsonNode, error) {
	before := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	return p.valueFrom(tok, p.start(before))
}

func (p *jsonParser) valueFrom(tok json.Token, start int64) (*jsonNode, error) {
	n := &jsonNode{line: p.lines.line(start)}
	switch t := tok.(type) {
	case json.Delim:
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxJSONDepth {
			return nil, errTooDeep
		}
		switch t {
		case '{':
			n.kind = jsonObject
			for p.dec.More() {
				keyTok, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := keyTok.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				keyLine := p.lines.line(p.dec.InputOffset())
				val, err := p.value()
				if err != nil {
					return nil, err
				}
				n.members = append(n.members, jsonMember{key: key, line: keyLine, val: val})
			}
		case '[':
			n.kind = jsonArray
			for p.dec.More() {
				val, err := p.value()
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, val)
			}
		default:
			return nil, fmt.Errorf("unexpected %q", rune(t))
		}
		if _, err := p.dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
	case string:
		n.kind, n.text = jsonString, t
	case json.Number:
		n.kind, n.text = jsonNumber, string(t)
	case bool:
		n.kind, n.boolean = jsonBool, t
	case nil:
		n.kind = jsonNull
	}
	end := p.dec.InputOffset()
	if start <= end && end <= int64(len(p.data)) {
		n.raw = p.data[start:end]
	}
	return n, nil
}

func (k jsonKind) String() string {
	switch k {
	case jsonBool:
		return "a boolean"
	case jsonNumber:
		return "a number"
	case jsonString:
		return "a string"
	case jsonObject:
		return "an object"
	case jsonArray:
		return "an array"
	default:
		return "null"
	}
}

// jsonDecoder copies a node tree into Go values, collecting issues.
type jsonDecoder struct {
	doc    *jsonDoc
	issues []lineIssue
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func (d *jsonDecoder) fail(line int, format string, args ...any) {
	d.issues = append(d.issues, lineIssue{line: line, message: fmt.Sprintf(format, args...)})
}

func (d *jsonDecoder) wrongType(n *jsonNode, path, want string) {
	d.doc.bad[path] = true
	d.fail(n.line, "field %q must be %s, got %s", path, want, n.kind)
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// decode stores n into v. path names the value in messages; the root is "".
func (d *jsonDecoder) decode(n *jsonNode, v reflect.Value, path string) {
	if path != "" {
		if _, seen := d.doc.lines[path]; !seen {
			d.doc.lines[path] = n.line
		}
	}
	if v.Type() == rawMessageType {
		v.SetBytes(bytes.Clone(n.raw))
		d.recordLines(n, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.kind == jsonNull {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		if n.kind != jsonObject {
			d.wrongType(n, path, "an object")
			return
		}
		d.decodeStruct(n, v, path)
	case reflect.Map:
		if n.kind == jsonNull {
			return
		}
		if n.kind != jsonObject {
			d.wrongType(n, path, "an object")
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(v.Type(), len(n.members)))
		}
		seen := map[string]bool{}
		for _, m := range n.members {
			p := joinPath(path, m.key)
			if seen[m.key] {
				d.fail(m.line, "duplicate key %q", p)
				continue
			}
			seen[m.key] = true
			d.doc.lines[p] = m.line
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(m.val, elem, p)
			v.SetMapIndex(reflect.ValueOf(m.key).Convert(v.Type().Key()), elem)
		}
	case reflect.Slice:
		if n.kind == jsonNull {
			return
		}
		if n.kind != jsonArray {
			d.wrongType(n, path, "an array")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.elems), len(n.elems))
		for i, e := range n.elems {
			d.decode(e, s.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		v.Set(s)
	case reflect.String:
		if n.kind != jsonString {
			d.wrongType(n, path, "a string")
			return
		}
		v.SetString(n.text)
	case reflect.Bool:
		if n.kind != jsonBool {
			d.wrongType(n, path, "a boolean")
			return
		}
		v.SetBool(n.boolean)
	case reflect.Int, reflect.Int64, reflect.Int32:
		if n.kind != jsonNumber {
			d.wrongType(n, path, "an integer")
			return
		}
		i, err := strconv.ParseInt(n.text, 10, v.Type().Bits())
		if err != nil {
			d.doc.bad[path] = true
			d.fail(n.line, "field %q must be an integer, got %s", path, n.text)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		if n.kind != jsonNumber {
			d.wrongType(n, path, "a number")
			return
		}
		f, err := strconv.ParseFloat(n.text, 64)
		if err != nil {
			d.doc.bad[path] = true
			d.fail(n.line, "field %q must be a number, got %s", path, n.text)
			return
		}
		v.SetFloat(f)
	default:
		d.fail(n.line, "field %q has an unsupported type", path)
	}
}

// recordLines records the lines of the values inside n, kept whole as raw JSON (a tool's
// parameter schema), so that problems found in it later can name their line.
func (d *jsonDecoder) recordLines(n *jsonNode, path string) {
	switch n.kind {
	case jsonObject:
		for _, m := range n.members {
			p := joinPath(path, m.key)
			if _, seen := d.doc.lines[p]; !seen {
				d.doc.lines[p] = m.line
			}
			d.recordLines(m.val, p)
		}
	case jsonArray:
		for i, e := range n.elems {
			p := path + "[" + strconv.Itoa(i) + "]"
			if _, seen := d.doc.lines[p]; !seen {
				d.doc.lines[p] = e.line
			}
			d.recordLines(e, p)
		}
	}
}

func (d *jsonDecoder) decodeStruct(n *jsonNode, v reflect.Value, path string) {
	fields := jsonFields(v.Type())
	seen := map[string]bool{}
	for _, m := range n.members {
		p := joinPath(path, m.key)
		if seen[m.key] {
			d.fail(m.line, "duplicate field %q", p)
			continue
		}
		seen[m.key] = true
		idx, ok := fields[m.key]
		if !ok {
			d.fail(m.line, "unknown field %q", p)
			continue
		}
		d.doc.lines[p] = m.line
		d.decode(m.val, v.Field(idx), p)
	}
}

// jsonFields maps the JSON names of t's exported fields to their index.
func jsonFields(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = i
	}
	return fields
}
