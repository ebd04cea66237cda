package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/handlers"
	"svc/runner/sse"
	"svc/runner/tools"
)

// toolJSON is the tool.json of the test tools: one optional number "n".
const toolJSON = `{"name": %q, "description": "test tool", "parameters": {"type": "object", "properties": {"n": {"type": "number"}}}}`

// load builds an agent with one tool per entry of handlers (tool name → handler.ts) through
// agent.Load, so that esbuild compiles them as a build would, and returns the agent's tools.
func load(tb testing.TB, handlerTS map[string]string) map[string]*agent.Tool {
	tb.Helper()
	fsys := fstest.MapFS{
		"svc.json":                  {Data: []byte(`{"name": "t", "version": "1"}`)},
		"agents/default/AGENT.md":   {Data: []byte("# T\n\nBe brief.\n")},
		"agents/default/agent.json": {Data: []byte(`{"name": "default"}`)},
	}
	for name, ts := range handlerTS {
		fsys["svc/tools/"+name+"/tool.json"] = &fstest.MapFile{Data: []byte(strings.Replace(toolJSON, "%q", `"`+name+`"`, 1))}
		fsys["svc/tools/"+name+"/handler.ts"] = &fstest.MapFile{Data: []byte(ts)}
	}
	a, err := agent.Load(fsys)
	if err != nil {
		tb.Fatalf("agent.Load: %v", err)
	}
	return a.Tools
}

// newTool compiles the one handler ts as tool "x".
func newTool(tb testing.TB, ts string, opts handlers.Options) *handlers.Tool {
	tb.Helper()
	h, err := handlers.New(load(tb, map[string]string{"x": ts})["x"], sandboxed(opts))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return h
}

// recorder is a tools.Host that keeps the frames it is given.
type recorder struct {
	mu     sync.Mutex
	frames []sse.Frame
}

func (r *recorder) Emit(f *sse.Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, *f)
	return nil
}
func (r *recorder) ActivateSkill(string) {}
func (r *recorder) NoteKnowledge(string) {}

func call(args string, host tools.Host) tools.Call {
	return tools.Call{ID: "call_1", Arguments: json.RawMessage(args), Host: host, Session: tools.Session{ID: "s1"}}
}

func TestResults(t *testing.T) {
	tests := []struct {
		name string
		ts   string
		args string
		want tools.Result
	}{
		{"sync object", "export default function (p: {n: number}) { return {double: p.n * 2}; }\n", `{"n": 21}`,
			tools.Result{Content: `{"double":42}`, Data: json.RawMessage(`{"double":42}`)}},
		{"async object", "export default async function (p: {n: number}) { await null; return {n: p.n}; }\n", `{"n": 1}`,
			tools.Result{Content: `{"n":1}`, Data: json.RawMessage(`{"n":1}`)}},
		{"awaits chained promises", "const later = async (v: number) => { await Promise.resolve(); return v + 1; };\n" +
			"export default async (p: {n: number}) => ({n: await later(await later(p.n))});\n", `{"n": 1}`,
			tools.Result{Content: `{"n":3}`, Data: json.RawMessage(`{"n":3}`)}},
		{"array", "export default async () => [1, \"two\"];\n", `{}`,
			tools.Result{Content: `[1,"two"]`, Data: json.RawMessage(`[1,"two"]`)}},
		{"string", "export default async () => \"done\";\n", `{}`, tools.Result{Content: "done"}},
		{"number", "export default async () => 4.5;\n", `{}`, tools.Result{Content: "4.5"}},
		{"undefined", "export default async () => {};\n", `{}`, tools.Result{}},
		{"null", "export default async () => null;\n", ``, tools.Result{}},
		{"no arguments", "export default async (p: object) => p;\n", ``,
			tools.Result{Content: `{}`, Data: json.RawMessage(`{}`)}},
		{"ctx fields", "export default async (p: object, ctx: any) => [ctx.toolName, ctx.callId, ctx.sessionId];\n", `{}`,
			tools.Result{Content: `["x","call_1","s1"]`, Data: json.RawMessage(`["x","call_1","s1"]`)}},
		{"module state is fresh per call", "let calls = 0;\nexport default async () => ++calls;\n", `{}`,
			tools.Result{Content: "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newTool(t, tt.ts, handlers.Options{})
			for range 2 { // the second call sees no state of the first
				got, err := h.Call(t.Context(), call(tt.args, nil))
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestSpec(t *testing.T) {
	h := newTool(t, "export default async () => 1;\n", handlers.Options{})
	s := h.Spec()
	if s.Name != "x" || s.Description != "test tool" || !strings.Contains(string(s.Parameters), `"n"`) {
		t.Errorf("Spec() = %+v, want tool.json's name, description and parameters", s)
	}
}

func TestThrowNamesTheHandlerLine(t *testing.T) {
	tests := []struct {
		name string
		ts   string
		want handlers.Error
	}{
		{"sync throw", "type P = {n: number};\n\nexport default function (p: P) {\n  if (p.n > 1) {\n    throw new Error(\"too big\");\n  }\n  return p;\n}\n",
			handlers.Error{Tool: "x", Message: "too big", File: "svc/tools/x/handler.ts", Line: 5}},
		{"async rejection after await", "type P = {n: number};\n\nexport default async function (p: P) {\n  await null;\n\n  if (p.n > 1) throw new RangeError(\"n is \" + p.n);\n  return p;\n}\n",
			handlers.Error{Tool: "x", Message: "RangeError: n is 2", File: "svc/tools/x/handler.ts", Line: 6}},
		{"runtime TypeError", "export default async function (p: any) {\n  return p.missing.field;\n}\n",
			handlers.Error{Tool: "x", Message: "TypeError: Cannot read property 'field' of undefined", File: "svc/tools/x/handler.ts", Line: 2}},
		{"thrown string", "export default function () {\n  throw \"plain\";\n}\n",
			handlers.Error{Tool: "x", Message: "plain", File: "svc/tools/x/handler.ts", Line: 2}},
		{"unbound ctx method", "export default async function (p: any, ctx: any) {\n\n  return await ctx.callTool(\"y\", {});\n}\n",
			handlers.Error{Tool: "x", Message: "ctx.callTool is not available to this handler", File: "svc/tools/x/handler.ts", Line: 3}},
		{"endless recursion", "function f(n: number): number {\n  return f(n + 1) + 1;\n}\nexport default async () => f(0);\n",
			handlers.Error{Tool: "x", Message: "RangeError: call stack over 1000 frames", File: "svc/tools/x/handler.ts", Line: 2}},
		{"require", "import fs from \"fs\";\nexport default async () => fs.readFileSync(\"/etc/passwd\");\n",
			handlers.Error{Tool: "x", Message: `require("fs") is not available: a handler cannot import modules`, File: "svc/tools/x/handler.ts", Line: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newTool(t, tt.ts, handlers.Options{})
			_, err := h.Call(t.Context(), call(`{"n": 2}`, nil))
			var got *handlers.Error
			if !errors.As(err, &got) {
				t.Fatalf("Call error = %v (%T), want *handlers.Error", err, err)
			}
			got.Column = 0 // columns depend on esbuild's output; lines are what people read
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestThrowMessage(t *testing.T) {
	h := newTool(t, "export default async function () {\n  await null;\n  throw new Error(\"no such customer\");\n}\n", handlers.Options{})
	_, err := h.Call(t.Context(), call(`{}`, nil))
	if want := "handler x threw at svc/tools/x/handler.ts:3: no such customer"; err == nil || err.Error() != want {
		t.Errorf("Call error = %v, want %q", err, want)
	}
}

func TestBadArguments(t *testing.T) {
	h := newTool(t, "export default async (p: object) => p;\n", handlers.Options{})
	_, err := h.Call(t.Context(), call(`{"n":`, nil))
	if !errors.Is(err, tools.ErrBadArguments) {
		t.Errorf("Call error = %v, want tools.ErrBadArguments", err)
	}
}

func TestPendingPromise(t *testing.T) {
	h := newTool(t, "export default async () => { await new Promise(() => {}); return 1; };\n", handlers.Options{})
	_, err := h.Call(t.Context(), call(`{}`, nil))
	if !errors.Is(err, handlers.ErrNotSettled) {
		t.Errorf("Call error = %v, want ErrNotSettled", err)
	}
}

func TestLogsAndLabels(t *testing.T) {
	ts := "export default async function (p: {n: number}, ctx: any) {\n" +
		"  ctx.setLabel(\"Counting\", \"Counted\");\n" +
		"  console.log(\"n is\", p.n, {deep: [1]});\n" +
		"  await null;\n" +
		"  console.warn(\"careful\");\n" +
		"  console.error(new Error(\"bad\"));\n" +
		"  ctx.log(\"via ctx\", undefined, null, true);\n" +
		"  ctx.setLabel(\"Almost\");\n" +
		"  return \"ok\";\n" +
		"}\n"
	h := newTool(t, ts, handlers.Options{})
	rec := &recorder{}
	if _, err := h.Call(t.Context(), call(`{"n": 3}`, rec)); err != nil {
		t.Fatalf("Call: %v", err)
	}
	want := []sse.Frame{
		{Type: sse.TypeToolLabelUpdate, ToolID: "call_1", RunningLabel: "Counting", CompletedLabel: "Counted"},
		{Type: sse.TypeToolLog, ToolName: "x", Message: `n is 3 {"deep":[1]}`},
		{Type: sse.TypeToolLog, ToolName: "x", Message: "warn: careful"},
		{Type: sse.TypeToolLog, ToolName: "x", Message: "error: Error: bad"},
		{Type: sse.TypeToolLog, ToolName: "x", Message: "via ctx undefined null true"},
		{Type: sse.TypeToolLabelUpdate, ToolID: "call_1", RunningLabel: "Almost"},
	}
	if diff := cmp.Diff(want, rec.frames); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}

func TestLogsAreBounded(t *testing.T) {
	ts := "export default async () => {\n  console.log(\"x\".repeat(100));\n  for (let i = 0; i < 1000; i++) console.log(\"line\", i);\n};\n"
	h := newTool(t, ts, handlers.Options{MaxLogLines: 3, MaxLogBytes: 10})
	rec := &recorder{}
	if _, err := h.Call(t.Context(), call(`{}`, rec)); err != nil {
		t.Fatalf("Call: %v", err)
	}
	var got []string
	for _, f := range rec.frames {
		got = append(got, f.Message)
	}
	want := []string{"xxxxxxx…", "line 0", "line 1", "(further log lines of this call are dropped)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}

func TestBigResultIsRefused(t *testing.T) {
	for _, ts := range []string{
		"export default async () => \"x\".repeat(2000);\n",
		"export default async () => ({text: \"x\".repeat(2000)});\n",
	} {
		h := newTool(t, ts, handlers.Options{MaxResultBytes: 1000})
		_, err := h.Call(t.Context(), call(`{}`, nil))
		if !errors.Is(err, handlers.ErrResultTooBig) {
			t.Errorf("Call error = %v, want ErrResultTooBig", err)
		}
	}
}

func TestResultNotJSON(t *testing.T) {
	h := newTool(t, "export default async () => { const o: any = {}; o.self = o; return o; };\n", handlers.Options{})
	_, err := h.Call(t.Context(), call(`{}`, nil))
	if err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("Call error = %v, want a value that is not JSON", err)
	}
}

func TestDeadlineInterruptsEndlessLoops(t *testing.T) {
	tests := map[string]string{
		"sync loop":        "export default function () { while (true) {} }\n",
		"loop after await": "export default async function () { await null; for (;;) {} }\n",
		"loop in result":   "export default async function () { return {toJSON() { for (;;) {} }}; }\n",
	}
	for name, ts := range tests {
		t.Run(name, func(t *testing.T) {
			h := newTool(t, ts, handlers.Options{Timeout: 50 * time.Millisecond})
			_, err := h.Call(t.Context(), call(`{}`, nil))
			if !errors.Is(err, handlers.ErrDeadline) {
				t.Fatalf("Call error = %v, want ErrDeadline", err)
			}
			if want := "handler x ran past its 50ms deadline"; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Call error = %q, want it to start with %q", err, want)
			}
		})
	}
}

func TestCallerDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	h := newTool(t, "export default function () { while (true) {} }\n", handlers.Options{})
	_, err := h.Call(ctx, call(`{}`, nil))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, handlers.ErrDeadline) {
		t.Errorf("Call error = %v, want the caller's deadline, not the handler's", err)
	}
}

func TestCancelInterrupts(t *testing.T) {
	errGone := errors.New("client left")
	ctx, cancel := context.WithCancelCause(t.Context())
	h := newTool(t, "export default function (p: object, ctx: any) { ctx.log(\"started\"); while (true) {} }\n", handlers.Options{})
	started := make(chan struct{})
	host := hostFunc(func(*sse.Frame) error { close(started); return nil })
	done := make(chan error, 1)
	go func() {
		_, err := h.Call(ctx, call(`{}`, host))
		done <- err
	}()
	<-started
	cancel(errGone)
	if err := <-done; !errors.Is(err, errGone) {
		t.Errorf("Call error = %v, want the cancel cause", err)
	}

	if _, err := h.Call(ctx, call(`{}`, nil)); !errors.Is(err, errGone) {
		t.Errorf("Call on a done ctx = %v, want the cancel cause", err)
	}
}

// hostFunc is a tools.Host whose Emit is a function.
type hostFunc func(*sse.Frame) error

func (f hostFunc) Emit(fr *sse.Frame) error { return f(fr) }
func (hostFunc) ActivateSkill(string)       {}
func (hostFunc) NoteKnowledge(string)       {}

func TestConcurrentCalls(t *testing.T) {
	h := newTool(t, "let seen = 0;\nexport default async function (p: {n: number}, ctx: any) {\n  seen++;\n  ctx.log(\"n\", p.n);\n  await null;\n  return {n: p.n, seen};\n}\n", handlers.Options{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			rec := &recorder{}
			args, _ := json.Marshal(map[string]int{"n": i})
			got, err := h.Call(t.Context(), call(string(args), rec))
			if err != nil {
				t.Errorf("Call %d: %v", i, err)
				return
			}
			want, _ := json.Marshal(map[string]int{"n": i, "seen": 1})
			if string(got.Data) != string(want) || len(rec.frames) != 1 {
				t.Errorf("Call %d = %s with %d frames, want %s with 1", i, got.Data, len(rec.frames), want)
			}
		})
	}
	wg.Wait()
}

func TestSupportDeskHandlers(t *testing.T) {
	a, err := agent.LoadDir(agenttest.Dir(t, "support-desk"))
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	tests := []struct {
		tool, args, want string
	}{
		{"refund_request", `{"customer_id": "c1", "amount_eur": -1, "reason": "x"}`,
			"handler refund_request is durable: it runs through RunDurable"},
		{"triage", `{"customer_id": "c1", "subject": "refund"}`,
			"handler triage threw at svc/tools/triage/handler.ts:7: ctx.callTool is not available to this handler"},
	}
	for _, tt := range tests {
		h, err := handlers.New(a.Tools[tt.tool], sandboxed(handlers.Options{}))
		if err != nil {
			t.Fatalf("New(%s): %v", tt.tool, err)
		}
		_, err = h.Call(t.Context(), call(tt.args, nil))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s(%s) error = %v, want %q", tt.tool, tt.args, err, tt.want)
		}
	}
}

func TestToolTSLayout(t *testing.T) {
	a, err := agent.Load(fstest.MapFS{
		"svc.json":                  {Data: []byte(`{"name": "t", "version": "1"}`)},
		"agents/default/AGENT.md":   {Data: []byte("# T\n\nBe brief.\n")},
		"agents/default/agent.json": {Data: []byte(`{"name": "default"}`)},
		"svc/tools/y/tool.ts": {Data: []byte("export default async (p: any, ctx: any) => {\n" +
			"  ctx.log(\"hi\");\n  return await ctx.callTool(\"z\", {});\n};\n")},
	})
	if err != nil {
		t.Fatalf("agent.Load: %v", err)
	}
	h, err := handlers.New(a.Tools["y"], sandboxed(handlers.Options{}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rec := &recorder{}
	_, err = h.Call(t.Context(), call(`{}`, rec))
	if want := "handler y threw at svc/tools/y/tool.ts:3: ctx.callTool is not bound for a tool.ts tool"; err == nil || err.Error() != want {
		t.Errorf("Call error = %v, want %q", err, want)
	}
	if len(rec.frames) != 1 || rec.frames[0].Message != "hi" {
		t.Errorf("frames = %+v, want the log line", rec.frames)
	}
}

func TestDefaultExportNotAFunction(t *testing.T) {
	h, err := handlers.New(&agent.Tool{Name: "x", JS: "exports.default = 42;\n"}, sandboxed(handlers.Options{}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := h.Call(t.Context(), call(`{}`, nil)); err == nil || !strings.Contains(err.Error(), "not a function") {
		t.Errorf("Call error = %v, want the default export is not a function", err)
	}
}

func TestNewRefusesToolsWithoutJS(t *testing.T) {
	if _, err := handlers.New(&agent.Tool{Name: "x"}, sandboxed(handlers.Options{})); !errors.Is(err, handlers.ErrNoHandler) {
		t.Errorf("New error = %v, want ErrNoHandler", err)
	}
	if _, err := handlers.New(&agent.Tool{Name: "x", JS: "exports.default = 1;"}, handlers.Options{}); !errors.Is(err, handlers.ErrNoSandbox) {
		t.Errorf("New without a sandbox: %v, want ErrNoSandbox", err)
	}
}

// The runner never parses an agent's JavaScript: broken JavaScript fails each call, in the
// sandbox, with the compiler's message.
func TestBrokenJavaScriptFailsItsCalls(t *testing.T) {
	h, err := handlers.New(&agent.Tool{Name: "x", JS: "this is not JavaScript"}, sandboxed(handlers.Options{}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := h.Call(t.Context(), call(`{}`, nil)); err == nil || !strings.HasPrefix(err.Error(), "compile handler x: ") {
		t.Errorf("Call error = %v, want the compile error", err)
	}
}

func TestInterruptedCallsLeaveNoGoroutines(t *testing.T) {
	h := newTool(t, "export default function () { while (true) {} }\n", handlers.Options{Timeout: 5 * time.Millisecond})
	timedOut := func() {
		t.Helper()
		if _, err := h.Call(t.Context(), call(`{}`, nil)); !errors.Is(err, handlers.ErrDeadline) {
			t.Fatalf("Call error = %v, want ErrDeadline", err)
		}
	}
	timedOut() // the first call starts what the package keeps for every call (the sandbox's pool)
	before := runtime.NumGoroutine()
	for range 10 {
		timedOut()
	}
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after the calls, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// An interrupt that lands while Go code reads a JavaScript value (here a getter of the
// result that never returns, read when the result is described) is the deadline, not an
// internal error: goja raises it there as a panic.
func TestDeadlineInAGetterOfTheResult(t *testing.T) {
	h := newTool(t, "export default function () { return { get text() { while (true) {} } } }\n", handlers.Options{Timeout: 20 * time.Millisecond})
	if _, err := h.Call(t.Context(), call(`{}`, nil)); !errors.Is(err, handlers.ErrDeadline) {
		t.Fatalf("Call error = %v, want ErrDeadline", err)
	}
}
