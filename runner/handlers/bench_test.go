package handlers

import (
	"encoding/json"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/dop251/goja"

	"svc/agent"
	"svc/runner/tools"
)

// benchTool compiles a trivial async handler, as the build would.
func benchTool(b *testing.B) *Tool {
	b.Helper()
	a, err := agent.Load(fstest.MapFS{
		"svc.json":                  {Data: []byte(`{"name": "t", "version": "1"}`)},
		"agents/default/AGENT.md":   {Data: []byte("# T\n\nBe brief.\n")},
		"agents/default/agent.json": {Data: []byte(`{"name": "default"}`)},
		"svc/tools/x/tool.json": {Data: []byte(`{"name": "x", "description": "d", ` +
			`"parameters": {"type": "object", "properties": {"n": {"type": "number"}}}}`)},
		"svc/tools/x/handler.ts": {Data: []byte("export default async function (p: {n: number}, ctx: any) {\n" +
			"  await null;\n  return {n: p.n + 1};\n}\n")},
	})
	if err != nil {
		b.Fatal(err)
	}
	t, err := New(a.Tools["x"], Options{})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

var benchCall = tools.Call{ID: "c", Arguments: json.RawMessage(`{"n": 1}`)}

// BenchmarkCallFresh is one call as Call makes it: a fresh runtime.
func BenchmarkCallFresh(b *testing.B) {
	t := benchTool(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.Call(b.Context(), benchCall); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallPooled is one call in a runtime reused from a sync.Pool, the alternative Call does
// not take (see doc.go: a runtime cannot be reset between calls).
func BenchmarkCallPooled(b *testing.B) {
	t := benchTool(b)
	pool := sync.Pool{New: func() any { return goja.New() }}
	b.ReportAllocs()
	for b.Loop() {
		vm := pool.Get().(*goja.Runtime)
		if _, err := t.run(b.Context(), vm, benchCall); err != nil {
			b.Fatal(err)
		}
		pool.Put(vm)
	}
}
