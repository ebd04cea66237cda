package svc_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"svc/errcode"
)

// The reference in docs/ is kept equal to the code by the checks below: every name a client
// meets on the wire (stream frame types and fields, done reasons, runtime routes, error codes
// and their HTTP statuses) must appear in the document that describes it. Names are read from
// the Go source with go/parser, so a constant added to the code fails here until it is written
// down.

const (
	docsRuntimePath = "docs/runtime.md"
	docsErrorsPath  = "docs/errors.md"
)

// docsGoFile is one parsed Go file with its string constants by name.
type docsGoFile struct {
	file   *ast.File
	consts map[string]string
}

func docsParseGo(t *testing.T, path string) *docsGoFile {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	g := &docsGoFile{file: f, consts: map[string]string{}}
	for _, c := range g.constSpecs() {
		for i, name := range c.spec.Names {
			if i < len(c.spec.Values) {
				if s, ok := docsStringLit(c.spec.Values[i]); ok {
					g.consts[name.Name] = s
				}
			}
		}
	}
	return g
}

// docsConstSpec is one ValueSpec of a const declaration with its declared type name ("" when
// untyped). A spec without type and values repeats the previous one, as Go does.
type docsConstSpec struct {
	spec     *ast.ValueSpec
	typeName string
}

func (g *docsGoFile) constSpecs() []docsConstSpec {
	var out []docsConstSpec
	for _, d := range g.file.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		prev := ""
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			typeName := docsTypeName(vs.Type)
			if vs.Type == nil && len(vs.Values) == 0 {
				typeName = prev
			}
			if vs.Type == nil && len(vs.Values) > 0 {
				// Untyped, or a conversion such as Type("x").
				if call, ok := vs.Values[0].(*ast.CallExpr); ok {
					typeName = docsTypeName(call.Fun)
				}
			}
			prev = typeName
			out = append(out, docsConstSpec{spec: vs, typeName: typeName})
		}
	}
	return out
}

// typedConsts returns the string values of the constants of type typeName, with their names.
func (g *docsGoFile) typedConsts(typeName string) map[string]string {
	out := map[string]string{}
	for _, c := range g.constSpecs() {
		if c.typeName != typeName {
			continue
		}
		for i, name := range c.spec.Names {
			if i < len(c.spec.Values) {
				if s, ok := docsStringLit(c.spec.Values[i]); ok {
					out[name.Name] = s
				}
			}
		}
	}
	return out
}

// value resolves e to a string: a literal, a conversion of one, or a constant of the file.
func (g *docsGoFile) value(e ast.Expr) (string, bool) {
	if s, ok := docsStringLit(e); ok {
		return s, true
	}
	if id, ok := e.(*ast.Ident); ok {
		s, ok := g.consts[id.Name]
		return s, ok
	}
	return "", false
}

func docsTypeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

// docsStringLit returns the value of a string literal, or of a conversion T("literal").
func docsStringLit(e ast.Expr) (string, bool) {
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
		e = call.Args[0]
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func (g *docsGoFile) funcDecl(name string) *ast.FuncDecl {
	for _, d := range g.file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name && fd.Recv == nil {
			return fd
		}
	}
	return nil
}

// docsHTTPStatus maps the net/http status constants the checked files use to their values. A
// file that starts using another one fails TestDocsErrorStatuses until it is added here.
var docsHTTPStatus = map[string]int{
	"StatusOK":                    http.StatusOK,
	"StatusCreated":               http.StatusCreated,
	"StatusAccepted":              http.StatusAccepted,
	"StatusNoContent":             http.StatusNoContent,
	"StatusBadRequest":            http.StatusBadRequest,
	"StatusUnauthorized":          http.StatusUnauthorized,
	"StatusForbidden":             http.StatusForbidden,
	"StatusNotFound":              http.StatusNotFound,
	"StatusMethodNotAllowed":      http.StatusMethodNotAllowed,
	"StatusConflict":              http.StatusConflict,
	"StatusGone":                  http.StatusGone,
	"StatusRequestEntityTooLarge": http.StatusRequestEntityTooLarge,
	"StatusUnsupportedMediaType":  http.StatusUnsupportedMediaType,
	"StatusUnprocessableEntity":   http.StatusUnprocessableEntity,
	"StatusTooManyRequests":       http.StatusTooManyRequests,
	"StatusInternalServerError":   http.StatusInternalServerError,
	"StatusNotImplemented":        http.StatusNotImplemented,
	"StatusBadGateway":            http.StatusBadGateway,
	"StatusServiceUnavailable":    http.StatusServiceUnavailable,
	"StatusGatewayTimeout":        http.StatusGatewayTimeout,
}

// docsStatusOf resolves an HTTP status expression: http.StatusX or an integer literal. ok is
// false for anything else (a variable, say), which the checks skip.
func docsStatusOf(t *testing.T, path string, e ast.Expr) (int, bool) {
	t.Helper()
	switch x := e.(type) {
	case *ast.SelectorExpr:
		if pkg, ok := x.X.(*ast.Ident); !ok || pkg.Name != "http" {
			return 0, false
		}
		n, ok := docsHTTPStatus[x.Sel.Name]
		if !ok {
			t.Errorf("%s uses http.%s, which docs_test.go does not know: add it to docsHTTPStatus", path, x.Sel.Name)
		}
		return n, ok
	case *ast.BasicLit:
		if x.Kind == token.INT {
			n, err := strconv.Atoi(x.Value)
			return n, err == nil
		}
	}
	return 0, false
}

// docsFile is a Markdown file of docs/ and its code spans.
type docsFile struct {
	path  string
	text  string
	spans map[string]bool
	lines []string
}

var docsCodeSpan = regexp.MustCompile("`([^`\n]+)`")

func docsRead(t *testing.T, path string) *docsFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	d := &docsFile{path: path, text: string(b), spans: map[string]bool{}, lines: strings.Split(string(b), "\n")}
	for _, m := range docsCodeSpan.FindAllStringSubmatch(d.text, -1) {
		d.spans[m[1]] = true
	}
	return d
}

// docsRequireSpans fails for every value of names (name → value) that d does not show as a code
// span. what says what the values are, from says where they come from.
func docsRequireSpans(t *testing.T, d *docsFile, names map[string]string, what, from string) {
	t.Helper()
	if len(names) == 0 {
		t.Errorf("found no %s in %s: docs_test.go no longer understands that file; update it", what, from)
		return
	}
	for _, name := range docsSortedKeys(names) {
		v := names[name]
		if d.spans[v] {
			continue
		}
		where := from
		if name != v {
			where = name + " in " + from
		}
		t.Errorf("%s does not document %s `%s` (%s): write it as a code span", d.path, what, v, where)
	}
}

func docsSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestDocsFrameTypes: every frame type (sse.Type constants) is in docs/runtime.md.
func TestDocsFrameTypes(t *testing.T) {
	const path = "runner/sse/frame.go"
	docsRequireSpans(t, docsRead(t, docsRuntimePath), docsParseGo(t, path).typedConsts("Type"), "frame type", path)
}

// TestDocsFrameFields: every JSON field a frame can carry is in docs/runtime.md. The fields are
// the names given to the field writers (field, optField, intField, rawField) and the keys
// spelled in the JSON fragments of appendFrame.
func TestDocsFrameFields(t *testing.T) {
	const path = "runner/sse/frame.go"
	g := docsParseGo(t, path)
	fn := g.funcDecl("appendFrame")
	if fn == nil {
		t.Fatalf("%s has no func appendFrame: docs_test.go no longer understands it; update it", path)
	}
	writers := map[string]bool{"field": true, "optField": true, "intField": true, "rawField": true}
	jsonKey := regexp.MustCompile(`"([a-z][a-z0-9_]*)":`)
	fields := map[string]string{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && writers[id.Name] && len(x.Args) >= 2 {
				if s, ok := g.value(x.Args[1]); ok {
					fields[s] = s
				}
			}
		case *ast.BasicLit:
			if s, ok := docsStringLit(x); ok {
				for _, m := range jsonKey.FindAllStringSubmatch(s, -1) {
					fields[m[1]] = m[1]
				}
			}
		}
		return true
	})
	docsRequireSpans(t, docsRead(t, docsRuntimePath), fields, "frame field", path)
}

// TestDocsDoneReasons: every done reason (loop.Reason constants) is in docs/runtime.md.
func TestDocsDoneReasons(t *testing.T) {
	const path = "runner/loop/loop.go"
	docsRequireSpans(t, docsRead(t, docsRuntimePath), docsParseGo(t, path).typedConsts("Reason"), "done reason", path)
}

// TestDocsRuntimeRoutes: every route of the runtime's mux is in docs/runtime.md as
// "`METHOD /path`".
func TestDocsRuntimeRoutes(t *testing.T) {
	const path = "runner/runtime/runtime.go"
	g := docsParseGo(t, path)
	routes := map[string]string{}
	ast.Inspect(g.file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc" {
			return true
		}
		if s, ok := g.value(call.Args[0]); ok && strings.Contains(s, " /") {
			routes[s] = s
		}
		return true
	})
	docsRequireSpans(t, docsRead(t, docsRuntimePath), routes, "runtime route", path)
}

// docsPlatformCatalog is the errcode catalog, which the platform API and the agent host router
// both answer from: code name → code, and code name → HTTP status.
func docsPlatformCatalog(t *testing.T) (map[string]string, map[string]int) {
	t.Helper()
	codes, statuses := map[string]string{}, map[string]int{}
	for _, c := range errcode.All() {
		codes[string(c)], statuses[string(c)] = string(c), c.Status()
	}
	return codes, statuses
}

// docsRuntimeCatalog reads the runtime's codes (Code... constants) and their statuses from the map
// literal catalog: {CodeX: {http.StatusY, "message"}}.
func docsRuntimeCatalog(t *testing.T) (map[string]string, map[string]int) {
	const path = "runner/runtime/errors.go"
	g := docsParseGo(t, path)
	codes := map[string]string{}
	for name, v := range g.consts {
		if strings.HasPrefix(name, "Code") {
			codes[name] = v
		}
	}
	statuses := map[string]int{}
	ast.Inspect(g.file, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		id, ok := kv.Key.(*ast.Ident)
		if !ok || codes[id.Name] == "" {
			return true
		}
		if lit, ok := kv.Value.(*ast.CompositeLit); ok && len(lit.Elts) > 0 {
			if status, ok := docsStatusOf(t, path, lit.Elts[0]); ok {
				statuses[id.Name] = status
			}
		}
		return true
	})
	return codes, statuses
}

// TestDocsErrorCodes: every error code a client can receive is in docs/errors.md: the platform
// catalog, the runtime's codes and the router's.
func TestDocsErrorCodes(t *testing.T) {
	d := docsRead(t, docsErrorsPath)
	platform, _ := docsPlatformCatalog(t)
	docsRequireSpans(t, d, platform, "platform error code", "errcode/errcode.go")
	runtimeCodes, _ := docsRuntimeCatalog(t)
	docsRequireSpans(t, d, runtimeCodes, "runtime error code", "runner/runtime/errors.go")
}

// TestDocsErrorStatuses: docs/errors.md states the right HTTP status of each code: some line
// (a table row) holds both the code as a code span and the status.
func TestDocsErrorStatuses(t *testing.T) {
	d := docsRead(t, docsErrorsPath)
	check := func(from string, codes map[string]string, statuses map[string]int) {
		for _, name := range docsSortedKeys(statuses) {
			code, status := codes[name], statuses[name]
			word := regexp.MustCompile(`(^|[^0-9])` + strconv.Itoa(status) + `([^0-9]|$)`)
			found := false
			for _, line := range d.lines {
				if strings.Contains(line, "`"+code+"`") && word.MatchString(line) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s has no line with `%s` and its status %d (%s)", d.path, code, status, from)
			}
		}
	}
	platform, platformStatus := docsPlatformCatalog(t)
	check("errcode/errcode.go", platform, platformStatus)
	runtimeCodes, runtimeStatus := docsRuntimeCatalog(t)
	check("runner/runtime/errors.go", runtimeCodes, runtimeStatus)
}
