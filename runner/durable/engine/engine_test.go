package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/handlers"
	"svc/runner/handlers/handlerstest"
	"svc/runner/sse"
)

// TestMain serves the handler sandbox's workers: this test binary is their executable.
func TestMain(m *testing.M) { handlerstest.Main(m) }

// clock is a settable engine.Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// wakeups is an engine.Config.Schedule that keeps the wake-ups for the test to deliver.
type wakeups struct {
	mu  sync.Mutex
	all []engine.Wakeup
}

func (w *wakeups) Schedule(_ context.Context, wu engine.Wakeup) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, wu)
	return nil
}

// at reports whether a wake-up of run id at t was asked for.
func (w *wakeups) at(id string, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.all, func(wu engine.Wakeup) bool { return wu.RunID == id && wu.At.Equal(t) })
}

// frames records what a deployment's Notify receives.
type frames struct {
	mu  sync.Mutex
	all []string // status of each session_updated
}

func (f *frames) notify(fr *sse.Frame) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all = append(f.all, fr.Status)
}

func (f *frames) statuses() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all)
}

const agentID, deployID = "agt_1", "dep_1"

// deployment is a deployment whose durable tool "flow" runs handler.
func deployment(t *testing.T, handler string, seen *frames) engine.Deployment {
	t.Helper()
	a, err := agent.Load(fstest.MapFS{
		"svc.json":                  {Data: []byte(`{"name": "flows", "version": "1", "models": {"main": {"provider": "echo", "model": "echo"}}}`)},
		"agents/default/AGENT.md":   {Data: []byte("# Flows\n\nRun flows.\n")},
		"agents/default/agent.json": {Data: []byte(`{"name": "default", "tools": ["flow"]}`)},
		"svc/tools/flow/tool.json": {Data: []byte(`{"name": "flow", "description": "a flow", "execution": "durable",
			"parameters": {"type": "object", "properties": {}}, "uses": {"tools": [], "subagents": []}}`)},
		"svc/tools/flow/handler.ts": {Data: []byte(handler)},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := handlers.New(a.Tools["flow"], handlers.Options{Sandbox: handlerstest.Pool(), Key: deployID})
	if err != nil {
		t.Fatal(err)
	}
	d := engine.Deployment{AgentID: agentID, DeployID: deployID, Tool: func(name string) (*handlers.Tool, error) {
		if name != "flow" {
			return nil, fmt.Errorf("no durable tool %s", name)
		}
		return h, nil
	}}
	if seen != nil {
		d.Notify = seen.notify
	}
	return d
}

// newEngine is a started engine of cfg, shut down when the test ends.
func newEngine(t *testing.T, cfg engine.Config, load func(ctx context.Context, deployID string) error) *engine.Engine {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	e := engine.New(cfg)
	if err := e.Start(load); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, e) })
	return e
}

// shutdown shuts e down, waiting as long as its executions take.
func shutdown(t *testing.T, e *engine.Engine) {
	t.Helper()
	if err := e.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// attach attaches d to e until the test ends.
func attach(t *testing.T, e *engine.Engine, d engine.Deployment) {
	t.Helper()
	detach := e.Attach(d)
	t.Cleanup(func() {
		if err := detach(context.Background()); err != nil {
			t.Errorf("detach: %v", err)
		}
	})
}

func startFlow(t *testing.T, e *engine.Engine) durable.Run {
	t.Helper()
	run, err := e.StartRun(t.Context(), durable.Run{AgentID: agentID, DeployID: deployID, ToolName: "flow", Input: json.RawMessage(`{}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func get(t *testing.T, e *engine.Engine, id string) durable.Run {
	t.Helper()
	run, err := e.Get(t.Context(), agentID, id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// A run starts, journals its steps and completes in one execution; its lease's wake-up was
// asked for, and its change was published to the agent's attached deployment.
func TestStart(t *testing.T) {
	store, wk, seen := &durable.Memory{}, &wakeups{}, &frames{}
	e := newEngine(t, engine.Config{Store: store, Schedule: wk.Schedule}, nil)
	attach(t, e, deployment(t, `export default async function (p: any, ctx: any) {
  const a = await ctx.step("a", () => 1);
  const b = await ctx.step("b", () => 2);
  return {sum: a + b};
}`, seen))
	run := startFlow(t, e)
	if run.Status != durable.Completed || string(run.Result) != `{"sum":3}` {
		t.Fatalf("run = %s %s %s", run.Status, run.Result, run.Error)
	}
	journal, err := store.Journal(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, en := range journal {
		keys = append(keys, en.Key)
	}
	if diff := cmp.Diff([]string{"step:a#1", "step:b#1"}, keys); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if !wk.at(run.ID, run.LeaseUntil) {
		t.Errorf("no wake-up at the lease's end %v: %+v", run.LeaseUntil, wk.all)
	}
	if diff := cmp.Diff([]string{durable.Completed}, seen.statuses()); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	if _, err := e.StartRun(t.Context(), durable.Run{AgentID: agentID, DeployID: "dep_other", ToolName: "flow"}, nil); !errors.Is(err, engine.ErrNotAttached) {
		t.Errorf("a run of a deployment not attached, without a loader: %v, want ErrNotAttached", err)
	}
}

const approvalHandler = `export default async function (p: any, ctx: any) {
  const a = await ctx.step("a", () => 1);
  const ok = await ctx.waitForApproval({question: "ship it?"});
  return {a, approved: ok.approved, by: ok.respondedBy};
}`

// A run parks at a human's approval and holds nothing; the answer claims it once and resumes it
// in the background from its journal; a second answer finds it moved on.
func TestParkAndAnswer(t *testing.T) {
	store, seen := &durable.Memory{}, &frames{}
	e := newEngine(t, engine.Config{Store: store}, nil)
	detach := e.Attach(deployment(t, approvalHandler, seen))
	run := startFlow(t, e)
	if run.Status != durable.AwaitingInput || run.Pause == nil || run.Pause.Kind != durable.PauseApproval || run.Pause.Question != "ship it?" {
		t.Fatalf("run = %+v", run)
	}
	claimed, err := e.Answer(t.Context(), run, json.RawMessage(`{"approved":true,"respondedBy":"ana"}`), "ana")
	if err != nil {
		t.Fatal(err)
	}
	if claimed.Status != durable.Running || claimed.AnsweredBy != "ana" {
		t.Errorf("claimed = %s by %q", claimed.Status, claimed.AnsweredBy)
	}
	if _, err := e.Answer(t.Context(), run, json.RawMessage(`{"approved":false}`), "bob"); !errors.Is(err, durable.ErrStale) && !errors.Is(err, durable.ErrRecorded) {
		t.Errorf("second answer: %v, want ErrStale or ErrRecorded", err)
	}
	// Detaching waits for the resumed execution in the background.
	if err := detach(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := get(t, e, run.ID)
	if got.Status != durable.Completed || string(got.Result) != `{"a":1,"approved":true,"by":"ana"}` {
		t.Errorf("answered run = %s %s %s", got.Status, got.Result, got.Error)
	}
	if diff := cmp.Diff([]string{durable.AwaitingInput, durable.Running, durable.Completed}, seen.statuses()); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
}

// A sleeping run woken early sleeps on (its wake-up asked for again); woken at its time, it
// resumes and completes before Wake returns. Without a Schedule a timer of the process wakes it.
func TestWake(t *testing.T) {
	const sleeper = `export default async function (p: any, ctx: any) {
  await ctx.sleepUntil(ctx.now() + 60000);
  return "slept";
}`
	t.Run("queue", func(t *testing.T) {
		store, wk, clk := &durable.Memory{}, &wakeups{}, newClock()
		e := newEngine(t, engine.Config{Store: store, Schedule: wk.Schedule, Now: clk.Now}, nil)
		attach(t, e, deployment(t, sleeper, nil))
		run := startFlow(t, e)
		if run.Status != durable.Sleeping || run.Pause.WakeAt == nil || !run.Pause.WakeAt.Equal(clk.Now().Add(time.Minute)) {
			t.Fatalf("run = %+v", run)
		}
		if !wk.at(run.ID, *run.Pause.WakeAt) {
			t.Errorf("no wake-up at %v: %+v", run.Pause.WakeAt, wk.all)
		}
		clk.Add(30 * time.Second)
		if err := e.Wake(t.Context(), agentID, run.ID); err != nil {
			t.Fatal(err)
		}
		if got := get(t, e, run.ID); got.Status != durable.Sleeping {
			t.Errorf("woken early: %s", got.Status)
		}
		clk.Add(30 * time.Second)
		if err := e.Wake(t.Context(), agentID, run.ID); err != nil {
			t.Fatal(err)
		}
		if got := get(t, e, run.ID); got.Status != durable.Completed || string(got.Result) != `"slept"` {
			t.Errorf("woken: %s %s %s", got.Status, got.Result, got.Error)
		}
		if err := e.Wake(t.Context(), agentID, "dur_missing"); err != nil {
			t.Errorf("wake of a missing run: %v", err)
		}
	})
	t.Run("timer", func(t *testing.T) {
		store := &durable.Memory{}
		e := newEngine(t, engine.Config{Store: store}, nil)
		attach(t, e, deployment(t, `export default async function (p: any, ctx: any) {
  await ctx.sleepUntil(ctx.now() + 1);
  return "slept";
}`, nil))
		run := startFlow(t, e)
		waitStatus(t, e, run.ID, durable.Completed)
	})
}

// waitStatus polls run id until its status is want (a timer of the process wakes it); the bound
// is generous and asserts nothing about speed.
func waitStatus(t *testing.T, e *engine.Engine, id, want string) durable.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		run := get(t, e, id)
		if run.Status == want {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s", id, run.Status, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An unanswered pause expires at its time as its onTimeout says: a default answer resumes the
// run; an escalation puts the question to other answerers with a timeout of its own.
func TestExpire(t *testing.T) {
	cases := []struct {
		name, opts string
		check      func(t *testing.T, run durable.Run)
	}{
		{"default", `timeout: 1000, onTimeout: {default: "b"}`, func(t *testing.T, run durable.Run) {
			if run.Status != durable.Completed || string(run.Result) != `{"value":"b","by":"timeout"}` {
				t.Errorf("expired run = %s %s %s", run.Status, run.Result, run.Error)
			}
		}},
		{"escalate", `timeout: 1000, eligibleAnswerers: ["ana"], onTimeout: {escalate: ["cfo"], timeout: 60000}`, func(t *testing.T, run durable.Run) {
			if run.Status != durable.AwaitingInput || run.Pause == nil || !cmp.Equal(run.Pause.EligibleAnswerers, []string{"cfo"}) {
				t.Errorf("escalated run = %+v", run)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store, wk, clk := &durable.Memory{}, &wakeups{}, newClock()
			e := newEngine(t, engine.Config{Store: store, Schedule: wk.Schedule, Now: clk.Now}, nil)
			attach(t, e, deployment(t, `export default async function (p: any, ctx: any) {
  const a = await ctx.requestInput({question: "which?", options: [{value: "a", label: "A"}, {value: "b", label: "B"}], `+c.opts+`});
  return {value: a.value, by: a.respondedBy};
}`, nil))
			run := startFlow(t, e)
			if run.Status != durable.AwaitingInput || run.Pause.ExpiresAt == nil || !wk.at(run.ID, *run.Pause.ExpiresAt) {
				t.Fatalf("run = %+v, wake-ups %+v", run, wk.all)
			}
			clk.Add(2 * time.Second)
			if err := e.Wake(t.Context(), agentID, run.ID); err != nil {
				t.Fatal(err)
			}
			c.check(t, get(t, e, run.ID))
		})
	}
}

// gatedStore holds the journal writes of the key until their ctx ends, and reports each that
// reached it: an execution in flight when the engine shuts down.
type gatedStore struct {
	durable.Store
	key     string
	reached chan struct{}
}

func (s *gatedStore) RecordAll(ctx context.Context, id string, attempt int, es []durable.Entry) error {
	if slices.ContainsFunc(es, func(e durable.Entry) bool { return e.Key == s.key }) {
		s.reached <- struct{}{}
		<-ctx.Done()
		return context.Cause(ctx)
	}
	return s.Store.RecordAll(ctx, id, attempt, es)
}

// Shutdown waits for the executions in flight; past its ctx it interrupts them. An interrupted
// run stores no outcome and stays running under its lease: after the lease, another engine's
// wake-up resumes it from its journal and completes it. A shut-down engine starts nothing.
func TestShutdown(t *testing.T) {
	const twoSteps = `export default async function (p: any, ctx: any) {
  const a = await ctx.step("a", () => 1);
  const b = await ctx.step("b", () => 2);
  return a + b;
}`
	store, clk := &durable.Memory{}, newClock()
	gated := &gatedStore{Store: store, key: "step:b#1", reached: make(chan struct{}, 1)}
	first := engine.New(engine.Config{Store: gated, Schedule: (&wakeups{}).Schedule, Now: clk.Now, Logger: slog.New(slog.DiscardHandler)})
	if err := first.Start(nil); err != nil {
		t.Fatal(err)
	}
	detach := first.Attach(deployment(t, twoSteps, nil))
	started := make(chan durable.Run, 1)
	go func() {
		run, err := first.StartRun(context.Background(), durable.Run{AgentID: agentID, DeployID: deployID, ToolName: "flow"}, nil)
		if err != nil {
			t.Errorf("start: %v", err)
		}
		started <- run
	}()
	<-gated.reached // the execution is in flight, stuck in a journal write
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := first.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("shutdown past its ctx: %v, want the ctx's cause", err)
	}
	run := <-started
	if run.Status != durable.Running {
		t.Fatalf("interrupted run = %s %s, want running", run.Status, run.Error)
	}
	if err := detach(context.Background()); err != nil {
		t.Errorf("detach after shutdown: %v", err)
	}
	if _, err := first.StartRun(t.Context(), durable.Run{AgentID: agentID, DeployID: deployID, ToolName: "flow"}, nil); !errors.Is(err, engine.ErrShutdown) && !errors.Is(err, engine.ErrNotAttached) {
		t.Errorf("start after shutdown: %v", err)
	}

	// The next process: its engine resumes the run once its lease ended.
	second := newEngine(t, engine.Config{Store: store, Schedule: (&wakeups{}).Schedule, Now: clk.Now}, nil)
	attach(t, second, deployment(t, twoSteps, nil))
	clk.Add(time.Minute)
	if err := second.Wake(t.Context(), agentID, run.ID); err != nil {
		t.Fatal(err)
	}
	if got := get(t, second, run.ID); got.Status != durable.Completed || string(got.Result) != `"3"` || got.Attempt != 2 {
		t.Errorf("resumed run = %s %s %s (attempt %d)", got.Status, got.Result, got.Error, got.Attempt)
	}

	// Shutdown within its ctx lets the answered run's execution finish.
	third := engine.New(engine.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err := third.Start(nil); err != nil {
		t.Fatal(err)
	}
	third.Attach(deployment(t, approvalHandler, nil))
	parked, err := third.StartRun(t.Context(), durable.Run{AgentID: agentID, DeployID: deployID, ToolName: "flow"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := third.Answer(t.Context(), parked, json.RawMessage(`{"approved":true,"respondedBy":"ana"}`), "ana"); err != nil {
		t.Fatal(err)
	}
	shutdown(t, third)
	if got := get(t, third, parked.ID); got.Status != durable.Completed {
		t.Errorf("answered run after shutdown = %s %s", got.Status, got.Error)
	}
}

// A run whose deployment is not attached (an answer that reached another deployment, a wake-up
// on a fresh worker) resumes after the engine's loader attaches it.
func TestResumeLoadsDeployment(t *testing.T) {
	store := &durable.Memory{}
	first := newEngine(t, engine.Config{Store: store}, nil)
	attach(t, first, deployment(t, approvalHandler, nil))
	run := startFlow(t, first)

	var loads []string
	var second *engine.Engine
	d := deployment(t, approvalHandler, nil)
	second = newEngine(t, engine.Config{Store: store}, func(_ context.Context, id string) error {
		loads = append(loads, id)
		attach(t, second, d)
		return nil
	})
	if _, err := second.Answer(t.Context(), run, json.RawMessage(`{"approved":true,"respondedBy":"ana"}`), "ana"); err != nil {
		t.Fatal(err)
	}
	shutdown(t, second) // waits for the resumed execution
	if got := get(t, second, run.ID); got.Status != durable.Completed {
		t.Errorf("run = %s %s", got.Status, got.Error)
	}
	if diff := cmp.Diff([]string{deployID}, loads); diff != "" {
		t.Errorf("loads (-want +got):\n%s", diff)
	}
}
