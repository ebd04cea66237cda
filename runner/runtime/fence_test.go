package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/runtime"
)

// One execution of a durable run at a time (issue 23): an execution that runs past its lease is
// fenced off by the next one, and a run whose executions keep doing so fails.

// eachDurableStore runs fn as subtests memory, sqlite and postgres, each on a fresh store.
func eachDurableStore(t *testing.T, fn func(t *testing.T, s durable.Store)) {
	t.Run("memory", func(t *testing.T) { fn(t, &durable.Memory{}) })
	t.Run("sqlite", func(t *testing.T) { fn(t, durable.NewDB(dbtest.SQLite(t))) })
	t.Run("postgres", func(t *testing.T) { fn(t, durable.NewDB(dbtest.Postgres(t))) })
}

// gateStore is a Store that holds the journal writes carrying one key at a gate until the test
// lets each go, deaf to their ctx: an execution stuck where nothing interrupts it (a handler in a
// built-in call that goja cannot interrupt, a stalled connection). It holds the first hold such
// writes and lets the later ones through.
type gateStore struct {
	durable.Store
	key     string
	reached chan *heldWrite // each held write, when it reaches the gate
	mu      sync.Mutex
	hold    int
	opened  bool
	held    []*heldWrite
}

// heldWrite is a journal write waiting at the gate.
type heldWrite struct {
	entries []durable.Entry
	release chan struct{} // closed by Release
	once    sync.Once
	outcome chan error // the store's answer, once released
}

// Release lets the write go on to the store; its outcome follows.
func (w *heldWrite) Release() { w.once.Do(func() { close(w.release) }) }

// Outcome releases the write and returns the store's answer to it.
func (w *heldWrite) Outcome() error {
	w.Release()
	return <-w.outcome
}

func newGateStore(s durable.Store, key string, hold int) *gateStore {
	return &gateStore{Store: s, key: key, hold: hold, reached: make(chan *heldWrite, hold)}
}

// Open releases every held write and lets those to come through.
func (s *gateStore) Open() {
	s.mu.Lock()
	s.opened = true
	held := s.held
	s.mu.Unlock()
	for _, w := range held {
		w.Release()
	}
}

func (s *gateStore) RecordAll(ctx context.Context, id string, attempt int, es []durable.Entry) error {
	w := s.gate(es)
	if w == nil {
		return s.Store.RecordAll(ctx, id, attempt, es)
	}
	<-w.release
	err := s.Store.RecordAll(context.WithoutCancel(ctx), id, attempt, es)
	w.outcome <- err
	return err
}

func (s *gateStore) Record(ctx context.Context, id string, attempt int, e durable.Entry) error {
	w := s.gate([]durable.Entry{e})
	if w == nil {
		return s.Store.Record(ctx, id, attempt, e)
	}
	<-w.release
	err := s.Store.Record(context.WithoutCancel(ctx), id, attempt, e)
	w.outcome <- err
	return err
}

// gate returns the held write of es, when it is to wait at the gate, and tells the test; nil
// when it goes through.
func (s *gateStore) gate(es []durable.Entry) *heldWrite {
	if !slices.ContainsFunc(es, func(e durable.Entry) bool { return e.Key == s.key }) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == 0 || s.opened {
		return nil
	}
	s.hold--
	w := &heldWrite{entries: slices.Clone(es), release: make(chan struct{}), outcome: make(chan error, 1)}
	s.held = append(s.held, w)
	s.reached <- w
	return w
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
	e := start(t, runtime.Options{Agent: fencedAgent(t), Now: clk.Now,
		Durable: durableEngine(t, engine.Config{Store: gate, Now: clk.Now, Schedule: func(context.Context, engine.Wakeup) error { return nil }})})
	t.Cleanup(gate.Open) // before the runtime's Close, which waits for the held executions
	return e, clk, startFlow(t, e)
}

// lapse is past the lease of an execution under the default handler timeout (10 s + 5 s).
const lapse = 16 * time.Second

func journalOf(t *testing.T, s durable.Store, id string) map[string]string {
	t.Helper()
	j, err := s.Journal(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range j {
		if _, dup := out[e.Key]; dup {
			t.Errorf("journal key %s twice", e.Key)
		}
		out[e.Key] = string(e.Value)
	}
	return out
}

// An execution held past its lease (stuck before its first step's entry is written) does not
// keep the run: the lease's wake-up claims it and executes it again while the first execution
// still runs; the second completes, and nothing the first writes afterwards lands: its journal
// entry is refused (ErrStale) and its outcome is dropped.
func TestDurableOverrunIsFenced(t *testing.T) {
	eachDurableStore(t, func(t *testing.T, s durable.Store) {
		ctx := t.Context()
		gate := newGateStore(s, "step:a#1", 1)
		e, clk, id := fencedRuntime(t, gate)
		if r := e.do("POST", "/api/sessions/"+id+"/answer", "", map[string]any{"value": true}); r.Status != 200 || r.JSON["status"] != "running" {
			t.Fatalf("answer: %d %s", r.Status, r.Body)
		}
		held := <-gate.reached // the first execution is stuck writing its step
		if first, err := s.Get(ctx, "", id); err != nil || first.Status != durable.Running || first.Attempt != 2 {
			t.Fatalf("run while the first execution is stuck = %+v, %v", first, err)
		}

		clk.Add(lapse)
		if err := e.runs.Wake(ctx, "", id); err != nil {
			t.Fatal(err)
		}
		second, err := s.Get(ctx, "", id)
		if err != nil || second.Status != durable.Completed || second.Attempt != 3 || second.Executions != 2 {
			t.Fatalf("run after the wake-up = %+v, %v", second, err)
		}

		if err := held.Outcome(); !errors.Is(err, durable.ErrStale) {
			t.Errorf("the first execution's late step: %v, want ErrStale", err)
		}
		if err := e.rt.Close(ctx); err != nil { // waits for the first execution
			t.Fatal(err)
		}
		after, err := s.Get(ctx, "", id)
		if err != nil || !cmp.Equal(after, second) {
			t.Errorf("the first execution changed the run (-second +after):\n%s", cmp.Diff(second, after))
		}
		var result struct{ A, B json.Number }
		if err := json.Unmarshal(after.Result, &result); err != nil {
			t.Fatal(err)
		}
		j := journalOf(t, s, id)
		if j["step:a#1"] != result.A.String() || j["step:a#1"] == string(held.entries[0].Value) || j["step:b#1"] != "2" || len(j) != 4 {
			t.Errorf("journal %v with result %s; the first execution's step was %s", j, after.Result, held.entries[0].Value)
		}
	})
}

// An execution whose lease ends, even before anyone claims the run, writes nothing more and its
// outcome is dropped: the entry it was writing when the lease ended lands, the rest do not, and
// the run stays running until the lease's wake-up resumes it from its journal.
func TestDurableLeaseEndDropsOutcome(t *testing.T) {
	s := &durable.Memory{}
	gate := newGateStore(s, "step:a#1", 1)
	e, clk, id := fencedRuntime(t, gate)
	ctx := t.Context()
	if r := e.do("POST", "/api/sessions/"+id+"/answer", "", map[string]any{"value": true}); r.Status != 200 {
		t.Fatalf("answer: %d %s", r.Status, r.Body)
	}
	held := <-gate.reached
	clk.Add(lapse)
	if err := held.Outcome(); err != nil {
		t.Errorf("the write in flight when the lease ended: %v", err)
	}
	// Nothing else: the rest of the execution writes nothing and stores no outcome. Close waits
	// for it.
	if err := e.rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := s.Get(ctx, "", id)
	if err != nil || run.Status != durable.Running || run.Attempt != 2 || run.Result != nil {
		t.Fatalf("run after its execution's lease ended = %+v, %v", run, err)
	}
	j := journalOf(t, s, id)
	if _, ok := j["tool:noop#1"]; ok || j["step:a#1"] != string(held.entries[0].Value) || len(j) != 2 {
		t.Errorf("journal %v: want the approval and the step in flight only", j)
	}

	// The lease's wake-up resumes the run from its journal: the step in flight is not run again.
	again := start(t, runtime.Options{Agent: fencedAgent(t), Now: clk.Now,
		Durable: durableEngine(t, engine.Config{Store: s, Now: clk.Now, Schedule: func(context.Context, engine.Wakeup) error { return nil }})})
	if err := again.runs.Wake(ctx, "", id); err != nil {
		t.Fatal(err)
	}
	run, err = s.Get(ctx, "", id)
	if want := `{"a":` + string(held.entries[0].Value) + `,"b":2}`; err != nil || run.Status != durable.Completed || string(run.Result) != want {
		t.Errorf("resumed run = %+v, %v; want result %s", run, err, want)
	}
}

// A run whose executions keep running past their lease is not resumed forever: after
// MaxExecutions executions that did not finish, the lease's wake-up fails it with the reason
// and publishes the change; none of the stuck executions' writes lands. (Each stuck execution
// is let go once the next one is stuck: never more than two at once, as a runner whose handlers
// run in a bounded pool of workers would allow.)
func TestDurableGivesUpAfterLostExecutions(t *testing.T) {
	eachDurableStore(t, func(t *testing.T, s durable.Store) {
		ctx := t.Context()
		gate := newGateStore(s, "step:a#1", engine.MaxExecutions)
		e, clk, id := fencedRuntime(t, gate)
		events, err := e.srv.Client().Do(e.request("GET", "/api/events", "", nil))
		if err != nil {
			t.Fatal(err)
		}
		defer events.Body.Close()
		got := make(chan []frame, 1)
		go func() { got <- readFrames(t, events.Body, 2) }()

		if r := e.do("POST", "/api/sessions/"+id+"/answer", "", map[string]any{"value": true}); r.Status != 200 {
			t.Fatalf("answer: %d %s", r.Status, r.Body)
		}
		stuck := <-gate.reached
		var wakes sync.WaitGroup
		defer func() { gate.Open(); wakes.Wait() }()
		for n := 2; n <= engine.MaxExecutions; n++ {
			clk.Add(lapse)
			wakes.Go(func() {
				if err := e.runs.Wake(ctx, "", id); err != nil {
					t.Errorf("wake %d: %v", n, err)
				}
			})
			next := <-gate.reached // execution n is stuck too, and the one before it fenced off
			if run, err := s.Get(ctx, "", id); err != nil || run.Status != durable.Running || run.Executions != n {
				t.Fatalf("run during execution %d = %+v, %v", n, run, err)
			}
			if err := stuck.Outcome(); !errors.Is(err, durable.ErrStale) {
				t.Errorf("the late step of execution %d: %v, want ErrStale", n-1, err)
			}
			stuck = next
		}
		clk.Add(lapse)
		if err := e.runs.Wake(ctx, "", id); err != nil {
			t.Fatal(err)
		}
		run, err := s.Get(ctx, "", id)
		want := "gave up after 5 executions that did not finish: each ran past its lease of 15s"
		if err != nil || run.Status != durable.Failed || !strings.HasPrefix(run.Error, want) {
			t.Fatalf("run after the last lapse = %+v, %v; want failed: %s", run, err, want)
		}
		if r := e.do("GET", "/api/sessions/"+id, "", nil); r.JSON["status"] != "failed" || !strings.HasPrefix(str(r.JSON["error"]), want) {
			t.Errorf("GET: %s", r.Body)
		}
		select {
		case fs := <-got:
			var seen []string
			for _, f := range fs {
				seen = append(seen, str(f.Data["status"]))
			}
			if want := []string{"running", "failed"}; !slices.Equal(seen, want) {
				t.Errorf("events %q, want %q", seen, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no events")
		}

		if err := stuck.Outcome(); !errors.Is(err, durable.ErrStale) {
			t.Errorf("the late step of the last execution: %v, want ErrStale", err)
		}
		wakes.Wait()
		if err := e.rt.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if after, err := s.Get(ctx, "", id); err != nil || !cmp.Equal(after, run) {
			t.Errorf("a stuck execution changed the run (-failed +after):\n%s", cmp.Diff(run, after))
		}
		if j := journalOf(t, s, id); len(j) != 1 {
			t.Errorf("journal %v: want the approval only", j)
		}
	})
}

// The answer is 200 with the record (running) as soon as the answer is recorded, while the
// execution it resumed is still held; the run completes once it is let go.
func TestDurableAnswerReturnsWhileRunning(t *testing.T) {
	s := &durable.Memory{}
	gate := newGateStore(s, "step:a#1", 1)
	e, _, id := fencedRuntime(t, gate)
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
