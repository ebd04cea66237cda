package workers_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/workers"
)

// fakeRun is an AutomationFireConfig.Run that records its runs; a fire whose time is in block
// waits until the test closes its channel.
type fakeRun struct {
	mu      sync.Mutex
	ran     []time.Time
	block   map[time.Time]chan struct{}
	started chan time.Time // each run, once it called Started
	err     error
}

func newFakeRun() *fakeRun {
	return &fakeRun{block: map[time.Time]chan struct{}{}, started: make(chan time.Time, 16)}
}

func (f *fakeRun) run(ctx context.Context, r workers.AutomationRun) (workers.AutomationResult, error) {
	f.mu.Lock()
	f.ran = append(f.ran, r.Fire.FireTime)
	wait := f.block[r.Fire.FireTime]
	err := f.err
	f.mu.Unlock()
	session := "s-" + r.Fire.FireTime.Format("1504")
	r.Started(session)
	f.started <- r.Fire.FireTime
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return workers.AutomationResult{}, ctx.Err()
		}
	}
	if err != nil {
		return workers.AutomationResult{SessionID: session}, err
	}
	return workers.AutomationResult{SessionID: session, DoneReason: "model_stop"}, nil
}

func (f *fakeRun) runs() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.ran...)
}

// handlerEnv is a schedEnv with an automation of overlap and the fire handler over a fakeRun.
type handlerEnv struct {
	*schedEnv
	a   registry.Automation
	h   *workers.AutomationFireHandler
	run *fakeRun
}

func newHandlerEnv(t *testing.T, overlap string) *handlerEnv {
	t.Helper()
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e := &handlerEnv{schedEnv: newSchedEnv(t, dbtest.SQLite(t), start), run: newFakeRun()}
	e.a = e.automation(t, `{"name":"m","trigger":{"every":"1m"},"action":{"message":"go"},"overlap":"`+overlap+`"}`, true)
	e.h = workers.NewAutomationFireHandler(workers.AutomationFireConfig{Automations: e.store, Queue: e.queue, Now: e.clock.Now,
		Metrics: e.metrics, Run: e.run.run})
	return e
}

// fire records a scheduled fire at minute m after noon and returns its task.
func (e *handlerEnv) fire(t *testing.T, m int) workers.Task {
	t.Helper()
	return e.fireOf(t, m, workers.TriggerSchedule)
}

// fireOf records a fire of trigger at minute m after noon and returns its task, which does not
// say the trigger: the handler reads it from the fire.
func (e *handlerEnv) fireOf(t *testing.T, m int, trigger string) workers.Task {
	t.Helper()
	at := time.Date(2026, 11, 26, 12, m, 0, 0, time.UTC)
	if ok, err := e.store.RecordFire(context.Background(), e.a.ID, at, trigger, nil); !ok || err != nil {
		t.Fatalf("RecordFire = %v, %v", ok, err)
	}
	return workers.NewAutomationFireTask(workers.AutomationFireTask{AutomationID: e.a.ID, FireTime: at})
}

func (e *handlerEnv) process(t *testing.T, task workers.Task) {
	t.Helper()
	if err := e.h.ProcessTask(context.Background(), task); err != nil {
		t.Fatalf("ProcessTask(%s): %v", task.ID, err)
	}
}

// startBlocked processes task in the background, its run blocked until the returned func is
// called (which then waits for the task to finish).
func (e *handlerEnv) startBlocked(t *testing.T, task workers.Task, at time.Time) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	e.run.mu.Lock()
	e.run.block[at] = gate
	e.run.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.h.ProcessTask(context.Background(), task); err != nil {
			t.Errorf("ProcessTask(%s): %v", task.ID, err)
		}
	})
	if got := <-e.run.started; !got.Equal(at) {
		t.Fatalf("started %v, want %v", got, at)
	}
	var once sync.Once
	release = func() { once.Do(func() { close(gate); wg.Wait() }) }
	t.Cleanup(release)
	return release
}

func (e *handlerEnv) status(t *testing.T, m int) registry.AutomationFire {
	t.Helper()
	f, err := e.store.GetFire(context.Background(), e.a.ID, time.Date(2026, 11, 26, 12, m, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAutomationFireDone(t *testing.T) {
	e := newHandlerEnv(t, "skip")
	e.clock.Set(time.Date(2026, 11, 26, 12, 1, 2, 0, time.UTC))
	e.process(t, e.fire(t, 1))
	f := e.status(t, 1)
	if f.Status != registry.FireDone || f.SessionID != "s-1201" || f.DoneReason != "model_stop" || f.StartedAt == nil || f.EndedAt == nil {
		t.Errorf("fire = %+v, want done with its session", f)
	}
	// Delivered again (a retry after its record, a stale enqueue): nothing more.
	e.process(t, e.fire(t, 2))
	e.process(t, workers.NewAutomationFireTask(workers.AutomationFireTask{AutomationID: e.a.ID, FireTime: f.FireTime}))
	if got := len(e.run.runs()); got != 2 {
		t.Errorf("%d runs, want 2 (the done fire is not run again)", got)
	}
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP svc_automation_runs_total Fires of automations by outcome: done, failed, skipped (paused, or overlap skip), disabled (the saver was revoked), interrupted (the process running it stopped).
# TYPE svc_automation_runs_total counter
svc_automation_runs_total{outcome="done"} 2
`), "svc_automation_runs_total"); err != nil {
		t.Error(err)
	}
	if got := metricValue(t, e.reg, "svc_automation_lag_seconds", ""); got != 2 {
		t.Errorf("lag observations = %v, want 2", got)
	}
}

func TestAutomationFireOverlap(t *testing.T) {
	t.Run("skip", func(t *testing.T) {
		e := newHandlerEnv(t, "skip")
		release := e.startBlocked(t, e.fire(t, 1), e.status(t, 1).FireTime)
		e.process(t, e.fire(t, 2))
		if f := e.status(t, 2); f.Status != registry.FireSkipped || !strings.Contains(f.Error, "overlap") {
			t.Errorf("second fire = %+v, want skipped for overlap", f)
		}
		release()
		if f := e.status(t, 1); f.Status != registry.FireDone {
			t.Errorf("first fire = %+v, want done", f)
		}
		if got := metricValue(t, e.reg, "svc_automation_runs_total", "skipped"); got != 1 {
			t.Errorf("skipped = %v, want 1", got)
		}
	})
	t.Run("queue", func(t *testing.T) {
		e := newHandlerEnv(t, "queue")
		release := e.startBlocked(t, e.fire(t, 1), e.status(t, 1).FireTime)
		second := e.fire(t, 2)
		e.process(t, second)
		if f := e.status(t, 2); f.Status != registry.FireQueued {
			t.Errorf("second fire while the first runs = %+v, want queued", f)
		}
		wait := second.ID + ":wait"
		if n := e.queue.counts()[wait]; n != 1 {
			t.Fatalf("the waiting fire's task %s was enqueued %d times, want once (%v)", wait, n, e.queue.counts())
		}
		// It looks again (its :wait task) while the first still runs: it waits on, under its own ID.
		e.process(t, workers.Task{Type: second.Type, Payload: second.Payload, ID: wait})
		if n := e.queue.counts()[second.ID]; n != 1 {
			t.Errorf("the waiting fire's own ID was enqueued %d times, want once", n)
		}
		release()
		e.process(t, second)
		if f := e.status(t, 2); f.Status != registry.FireDone {
			t.Errorf("second fire after the first ended = %+v, want done", f)
		}
		if got := e.run.runs(); len(got) != 2 || !got[1].Equal(e.status(t, 2).FireTime) {
			t.Errorf("runs = %v, want the first then the second", got)
		}
	})
	t.Run("allow", func(t *testing.T) {
		e := newHandlerEnv(t, "allow")
		release := e.startBlocked(t, e.fire(t, 1), e.status(t, 1).FireTime)
		e.process(t, e.fire(t, 2))
		if f := e.status(t, 2); f.Status != registry.FireDone {
			t.Errorf("second fire while the first runs = %+v, want done alongside", f)
		}
		if f := e.status(t, 1); f.Status != registry.FireRunning {
			t.Errorf("first fire = %+v, want still running", f)
		}
		release()
	})
}

func TestAutomationFireInterrupted(t *testing.T) {
	e := newHandlerEnv(t, "skip")
	task := e.fire(t, 1)
	// The first attempt started the fire, then its process died.
	if err := e.store.StartFire(context.Background(), e.a.ID, e.status(t, 1).FireTime, e.clock.Now(), true); err != nil {
		t.Fatal(err)
	}
	// Another task of the fire, at its first attempt, leaves it to the one running it.
	e.process(t, task)
	if f := e.status(t, 1); f.Status != registry.FireRunning {
		t.Errorf("fire after a first attempt of another task = %+v, want still running", f)
	}
	// The retry of the task that started it marks it interrupted.
	if err := e.h.ProcessTask(workers.WithAttempt(context.Background(), 2), task); err != nil {
		t.Fatal(err)
	}
	if f := e.status(t, 1); f.Status != registry.FireFailed || f.Error != "interrupted: the process running it stopped" {
		t.Errorf("fire = %+v, want failed, interrupted", f)
	}
	if got := e.run.runs(); len(got) != 0 {
		t.Errorf("Run called %d times on a retry, want never", len(got))
	}
	if got := metricValue(t, e.reg, "svc_automation_runs_total", "interrupted"); got != 1 {
		t.Errorf("interrupted = %v, want 1", got)
	}
	// A task that gave up before its fire started fails the fire.
	second := e.fire(t, 2)
	e.h.TaskFailed(context.Background(), second, errors.New("database gone"))
	if f := e.status(t, 2); f.Status != registry.FireFailed || !strings.Contains(f.Error, "database gone") {
		t.Errorf("fire whose task gave up = %+v, want failed with the cause", f)
	}
}

func TestAutomationFireSaverRevoked(t *testing.T) {
	e := newHandlerEnv(t, "skip")
	e.run.err = &workers.SaverRevokedError{Reason: "the saver's API key was revoked"}
	e.process(t, e.fire(t, 1))
	if f := e.status(t, 1); f.Status != registry.FireFailed || f.Error != "the saver's API key was revoked" || f.SessionID != "s-1201" {
		t.Errorf("fire = %+v, want failed with the reason", f)
	}
	a, err := e.store.ByID(context.Background(), e.a.ID)
	if err != nil || a.Enabled || a.DisabledReason != "the saver's API key was revoked" {
		t.Errorf("automation = %+v, %v; want disabled with the reason", a, err)
	}
	// Its fires queued meanwhile are skipped, not run.
	e.run.err = nil
	e.process(t, e.fire(t, 2))
	if f := e.status(t, 2); f.Status != registry.FireSkipped || f.Error != "disabled: the saver's API key was revoked" {
		t.Errorf("fire of the disabled automation = %+v, want skipped", f)
	}
	if got := len(e.run.runs()); got != 1 {
		t.Errorf("%d runs, want 1", got)
	}
	for outcome, want := range map[string]float64{"disabled": 1, "skipped": 1} {
		if got := metricValue(t, e.reg, "svc_automation_runs_total", outcome); got != want {
			t.Errorf("runs_total{%s} = %v, want %v", outcome, got, want)
		}
	}
}

func TestAutomationFireFailsAndSkips(t *testing.T) {
	e := newHandlerEnv(t, "skip")
	e.run.err = errors.New("no active deployment in production")
	e.process(t, e.fire(t, 1))
	if f := e.status(t, 1); f.Status != registry.FireFailed || f.Error != "no active deployment in production" {
		t.Errorf("fire = %+v, want failed with the run's error", f)
	}
	// Paused: its queued fire is skipped.
	off := false
	if _, err := e.store.Update(context.Background(), e.agentID, e.a.ID, registry.AutomationUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	e.process(t, e.fire(t, 2))
	if f := e.status(t, 2); f.Status != registry.FireSkipped || f.Error != "paused" {
		t.Errorf("fire of the paused automation = %+v, want skipped, paused", f)
	}
	// The operator's run now runs it paused or not, the trigger read from the fire.
	e.process(t, e.fireOf(t, 4, workers.TriggerRun))
	if f := e.status(t, 4); f.Status != registry.FireFailed || f.Trigger != workers.TriggerRun {
		t.Errorf("run now of the paused automation = %+v, want it run (and failed with the run's error)", f)
	}
	// Deleted: its fire went with it, and its task does nothing.
	task := e.fire(t, 3)
	if err := e.store.Delete(context.Background(), e.agentID, e.a.ID); err != nil {
		t.Fatal(err)
	}
	e.process(t, task)
	if got := len(e.run.runs()); got != 2 {
		t.Errorf("%d runs, want 2", got)
	}
	if err := e.h.ProcessTask(context.Background(), workers.Task{Type: workers.TaskAutomationFire, Payload: []byte("{")}); !errors.Is(err, workers.ErrSkipRetry) {
		t.Errorf("an unreadable payload: %v, want ErrSkipRetry", err)
	}
	if got := metricValue(t, e.reg, "svc_automation_runs_total", "failed"); got != 2 {
		t.Errorf("failed = %v, want 2", got)
	}
}
