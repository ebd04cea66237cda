package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/workers"
)

func testRetryThenSuccess(t *testing.T, h Harness) {
	l := newRecorder()
	cfg := baseConfig(t)
	q, _ := open(t, h, cfg)
	mux := workers.NewServeMux()
	l.handle(mux, "flaky", func(ctx context.Context, task workers.Task) error {
		n := workers.Attempt(ctx)
		l.add(fmt.Sprintf("attempt %d", n))
		if n < 3 {
			return fmt.Errorf("transient failure %d", n)
		}
		l.add("done")
		return nil
	})
	stop := start(t, q, mux)
	enqueue(t, q, workers.Task{Type: "flaky", ID: "flaky"}, workers.MaxRetry(5))
	l.waitFor(t, "done", 1)
	stop()
	want := []string{"attempt 1", "attempt 2", "attempt 3", "done"}
	if got := l.snapshot(); !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if errs := l.failures("flaky"); len(errs) != 0 {
		t.Errorf("TaskFailed called with %v for a task that succeeded", errs)
	}
}

func testMaxRetryFails(t *testing.T, h Harness) {
	l := newRecorder()
	cfg := baseConfig(t)
	q, _ := open(t, h, cfg)
	mux := workers.NewServeMux()
	l.handle(mux, "doomed", func(ctx context.Context, task workers.Task) error {
		l.add("attempt")
		return fmt.Errorf("boom %d", workers.Attempt(ctx))
	})
	stop := start(t, q, mux)
	task := workers.Task{Type: "doomed", ID: "doomed", Payload: []byte(`{"build":"b1"}`)}
	enqueue(t, q, task, workers.MaxRetry(2))
	l.waitFor(t, "failed doomed", 1)
	stop() // waits for the bookkeeping; anything more would show up below
	if n := l.count("attempt"); n != 3 {
		t.Errorf("handler ran %d times with MaxRetry(2), want 3", n)
	}
	errs := l.failures("doomed")
	if len(errs) != 1 {
		t.Fatalf("TaskFailed called %d times (%v), want once", len(errs), errs)
	}
	if !strings.Contains(errs[0].Error(), "boom 3") {
		t.Errorf("TaskFailed error = %q, want the last attempt's error (boom 3)", errs[0])
	}
	l.mu.Lock()
	got := l.tasks["doomed"][0]
	l.mu.Unlock()
	if got.Type != task.Type || string(got.Payload) != string(task.Payload) {
		t.Errorf("TaskFailed task = %+v, want %+v", got, task)
	}
	// A failed task frees its ID.
	if err := q.Enqueue(context.Background(), task); err != nil {
		t.Errorf("Enqueue of a failed task's ID = %v, want nil", err)
	}
}

func testSkipRetry(t *testing.T, h Harness) {
	l := newRecorder()
	cfg := baseConfig(t)
	q, _ := open(t, h, cfg)
	mux := workers.NewServeMux()
	l.handle(mux, "invalid", func(ctx context.Context, task workers.Task) error {
		l.add("attempt")
		return fmt.Errorf("bad input: %w", workers.ErrSkipRetry)
	})
	stop := start(t, q, mux)
	enqueue(t, q, workers.Task{Type: "invalid", ID: "invalid"}, workers.MaxRetry(5))
	l.waitFor(t, "failed invalid", 1)
	stop()
	if n := l.count("attempt"); n != 1 {
		t.Errorf("handler ran %d times after ErrSkipRetry, want 1", n)
	}
	errs := l.failures("invalid")
	if len(errs) != 1 || !errors.Is(errs[0], workers.ErrSkipRetry) || !strings.Contains(errs[0].Error(), "bad input") {
		t.Errorf("TaskFailed errors = %v, want one wrapping ErrSkipRetry with the handler's message", errs)
	}
}

func testPanic(t *testing.T, h Harness) {
	l := newRecorder()
	cfg := baseConfig(t)
	q, _ := open(t, h, cfg)
	mux := workers.NewServeMux()
	l.handle(mux, "panicky", func(ctx context.Context, task workers.Task) error {
		l.add("attempt " + task.ID)
		if task.ID == "always" || workers.Attempt(ctx) == 1 {
			panic("handler bug")
		}
		l.add("done " + task.ID)
		return nil
	})
	stop := start(t, q, mux)
	enqueue(t, q, workers.Task{Type: "panicky", ID: "once"}, workers.MaxRetry(1))
	enqueue(t, q, workers.Task{Type: "panicky", ID: "always"}, workers.MaxRetry(0))
	l.waitFor(t, "done once", 1)
	l.waitFor(t, "failed always", 1)
	stop()
	if n := l.count("attempt once"); n != 2 {
		t.Errorf("task that panicked once ran %d times, want 2", n)
	}
	if errs := l.failures("once"); len(errs) != 0 {
		t.Errorf("TaskFailed called for a task that recovered: %v", errs)
	}
	errs := l.failures("always")
	if len(errs) != 1 || !errors.Is(errs[0], workers.ErrPanic) || !strings.Contains(errs[0].Error(), "handler bug") {
		t.Errorf("TaskFailed errors = %v, want one wrapping ErrPanic naming the panic value", errs)
	}
}

// testNoHandler: a task whose type has no handler fails like any task (here at once), though no
// handler is there to be told, and no handler of another type is told of it.
func testNoHandler(t *testing.T, h Harness) {
	l := newRecorder()
	q, _ := open(t, h, baseConfig(t))
	mux := workers.NewServeMux()
	l.handle(mux, "known", func(context.Context, workers.Task) error { return nil })
	start(t, q, mux)
	task := workers.Task{Type: "unknown", ID: "orphan"}
	enqueue(t, q, task, workers.MaxRetry(0))
	// A task that failed for good frees its ID: poll for that.
	deadline := time.Now().Add(waitLimit)
	for {
		err := q.Enqueue(context.Background(), task, workers.MaxRetry(0))
		if err == nil {
			break
		}
		if !errors.Is(err, workers.ErrDuplicate) || time.Now().After(deadline) {
			t.Fatalf("Enqueue of the orphan's ID = %v; want it freed once the task failed", err)
		}
		time.Sleep(baseConfig(t).PollInterval)
	}
	if errs := l.failures("orphan"); len(errs) != 0 {
		t.Errorf("the handler of another type was told of the orphan's failure: %v", errs)
	}
}

func testTimeout(t *testing.T, h Harness) {
	l := newRecorder()
	cfg := baseConfig(t)
	q, _ := open(t, h, cfg)
	mux := workers.NewServeMux()
	l.handle(mux, "slow", func(ctx context.Context, task workers.Task) error {
		if _, ok := ctx.Deadline(); !ok {
			l.add("no deadline")
		}
		<-ctx.Done()
		return fmt.Errorf("gave up: %w", ctx.Err())
	})
	start(t, q, mux)
	enqueue(t, q, workers.Task{Type: "slow", ID: "slow"}, workers.MaxRetry(0), workers.Timeout(50*time.Millisecond))
	l.waitFor(t, "failed slow", 1)
	if errs := l.failures("slow"); len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("TaskFailed errors = %v, want one wrapping context.DeadlineExceeded", errs)
	}
	if l.count("no deadline") != 0 {
		t.Error("handler ctx had no deadline")
	}
}
