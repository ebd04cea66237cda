package runtime_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"svc/agent"
	"svc/runner/durable"
	"svc/runner/runtime"
)

// An answered run resumes in the background: the answer does not wait for its execution.

// gateStore is a Store that holds the journal writes carrying one key at a gate until the test
// opens it, deaf to their ctx: an execution stuck where nothing interrupts it (a handler in a
// built-in call that goja cannot interrupt, a stalled connection). It holds the first hold such
// writes and lets the later ones through.
type gateStore struct {
	durable.Store
	key      string
	reached  chan []durable.Entry // the entries of each held write, when it reaches the gate
	open     chan struct{}        // closed by Open
	opened   sync.Once
	outcomes chan error // the store's answer to each held write, once the gate opened
	mu       sync.Mutex
	hold     int
}

// Open lets the held writes go on, and those to come through.
func (s *gateStore) Open() { s.opened.Do(func() { close(s.open) }) }

func newGateStore(s durable.Store, key string, hold int) *gateStore {
	return &gateStore{Store: s, key: key, hold: hold, reached: make(chan []durable.Entry, hold),
		open: make(chan struct{}), outcomes: make(chan error, hold)}
}

func (s *gateStore) RecordAll(ctx context.Context, id string, attempt int, es []durable.Entry) error {
	if !s.held(es) {
		return s.Store.RecordAll(ctx, id, attempt, es)
	}
	<-s.open
	err := s.Store.RecordAll(context.WithoutCancel(ctx), id, attempt, es)
	s.outcomes <- err
	return err
}

func (s *gateStore) Record(ctx context.Context, id string, attempt int, e durable.Entry) error {
	if !s.held([]durable.Entry{e}) {
		return s.Store.Record(ctx, id, attempt, e)
	}
	<-s.open
	err := s.Store.Record(context.WithoutCancel(ctx), id, attempt, e)
	s.outcomes <- err
	return err
}

// held reports whether a write of es is to wait at the gate, and tells the test it does.
func (s *gateStore) held(es []durable.Entry) bool {
	if !slices.ContainsFunc(es, func(e durable.Entry) bool { return e.Key == s.key }) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == 0 {
		return false
	}
	s.hold--
	s.reached <- slices.Clone(es)
	return true
}

// fencedHandler waits for an approval, then journals a random step, calls a child tool (before
// which its journal is flushed: the step's entry is written there) and journals a second step.
const fencedHandler = `export default async function (p: any, ctx: any) {
  await ctx.waitForApproval("go?");
  const a = await ctx.step("a", () => Math.random());
  await ctx.callTool("noop", {});
  const b = await ctx.step("b", () => 2);
  return {a, b};
}`

// fencedAgent is an agent whose durable tool "flow" runs fencedHandler and may call "noop".
func fencedAgent(t *testing.T) *agent.Agent {
	t.Helper()
	a, err := agent.Load(fstest.MapFS{
		"svc.json":                  {Data: []byte(`{"name": "flows", "version": "1", "models": {"main": {"provider": "echo", "model": "echo"}}}`)},
		"agents/default/AGENT.md":   {Data: []byte("# Flows\n\nRun flows.\n")},
		"agents/default/agent.json": {Data: []byte(`{"name": "default", "tools": ["flow"]}`)},
		"svc/tools/flow/tool.json": {Data: []byte(`{"name": "flow", "description": "a flow", "execution": "durable",
			"parameters": {"type": "object", "properties": {}}, "uses": {"tools": ["noop"], "subagents": []}}`)},
		"svc/tools/flow/handler.ts": {Data: []byte(fencedHandler)},
		"svc/tools/noop/tool.json":  {Data: []byte(`{"name": "noop", "description": "does nothing", "parameters": {"type": "object", "properties": {}}}`)},
		"svc/tools/noop/handler.ts": {Data: []byte(`export default async () => "ok";`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fencedRuntime starts a runtime of fencedAgent on the gate store, its clock set by the test and
// its wake-ups left to the test (which calls Wake), and parks a run at its approval.
func fencedRuntime(t *testing.T, gate *gateStore) (*env, *clock, string) {
	t.Helper()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := start(t, runtime.Options{Agent: fencedAgent(t), Durable: gate, Now: clk.Now,
		Schedule: func(context.Context, runtime.Wakeup) error { return nil }})
	return e, clk, startFlow(t, e)
}

// The answer is 200 with the record (running) as soon as the answer is recorded, while the
// execution it resumed is still held; the run completes once it is let go.
func TestDurableAnswerReturnsWhileRunning(t *testing.T) {
	s := &durable.Memory{}
	gate := newGateStore(s, "step:a#1", 1)
	e, _, id := fencedRuntime(t, gate)
	defer gate.Open()
	r := e.do("POST", "/api/sessions/"+id+"/answer", "", map[string]any{"value": true})
	if r.Status != 200 || r.JSON["status"] != "running" || r.JSON["answered_by"] != "service" || r.JSON["session_id"] != id || r.JSON["pause"] != nil {
		t.Fatalf("answer: %d %s", r.Status, r.Body)
	}
	<-gate.reached
	if r := e.do("GET", "/api/sessions/"+id, "", nil); r.JSON["status"] != "running" {
		t.Errorf("GET while the execution is held: %s", r.Body)
	}
	gate.Open()
	r = e.waitRecord("", id, "completed")
	if result, _ := r.JSON["result"].(map[string]any); result["b"] != 2.0 {
		t.Errorf("completed record %s", r.Body)
	}
}
