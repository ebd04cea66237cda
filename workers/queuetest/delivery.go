package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/workers"
)

func testEnqueueAndProcess(t *testing.T, h Harness) {
	q, _ := open(t, h, baseConfig(t))
	l := newRecorder()
	var mu sync.Mutex
	seen := map[string]workers.Task{}
	attempts := map[string]int{}
	mux := workers.NewServeMux()
	mux.HandleFunc("echo", func(ctx context.Context, task workers.Task) error {
		mu.Lock()
		seen[string(task.Payload)] = task
		attempts[string(task.Payload)] = workers.Attempt(ctx)
		mu.Unlock()
		l.add("done " + string(task.Payload))
		return nil
	})
	start(t, q, mux)
	enqueue(t, q, workers.Task{Type: "echo", Payload: []byte("with-id"), ID: "task-1"})
	enqueue(t, q, workers.Task{Type: "echo", Payload: []byte("without-id")})
	enqueue(t, q, workers.Task{Type: "echo", ID: "empty-payload"})
	l.waitFor(t, "done with-id", 1)
	l.waitFor(t, "done without-id", 1)
	l.waitFor(t, "done ", 1)
	mu.Lock()
	defer mu.Unlock()
	if got := seen["with-id"]; got.ID != "task-1" || got.Type != "echo" {
		t.Errorf("task = %+v, want ID task-1 and type echo", got)
	}
	if got := seen["without-id"]; got.ID == "" {
		t.Errorf("task enqueued without ID reached its handler with no ID; want a generated one")
	}
	if got := seen[""]; got.ID != "empty-payload" || len(got.Payload) != 0 {
		t.Errorf("empty-payload task = %+v", got)
	}
	if attempts["with-id"] != 1 {
		t.Errorf("Attempt(ctx) = %d on the first run, want 1", attempts["with-id"])
	}
}

func testBadTask(t *testing.T, h Harness) {
	q, _ := open(t, h, baseConfig(t))
	tests := []struct {
		name string
		task workers.Task
		opts []workers.Option
		ok   bool
	}{
		{"empty type", workers.Task{}, nil, false},
		{"type at limit", workers.Task{Type: strings.Repeat("t", workers.MaxTypeLen)}, nil, true},
		{"type over limit", workers.Task{Type: strings.Repeat("t", workers.MaxTypeLen+1)}, nil, false},
		{"ID at limit", workers.Task{Type: "t", ID: strings.Repeat("i", workers.MaxIDLen)}, nil, true},
		{"ID over limit", workers.Task{Type: "t", ID: strings.Repeat("i", workers.MaxIDLen+1)}, nil, false},
		{"payload at limit", workers.Task{Type: "t", Payload: bytes.Repeat([]byte("p"), workers.MaxPayload)}, nil, true},
		{"payload over limit", workers.Task{Type: "t", Payload: bytes.Repeat([]byte("p"), workers.MaxPayload+1)}, nil, false},
		{"negative MaxRetry", workers.Task{Type: "t"}, []workers.Option{workers.MaxRetry(-1)}, false},
		{"zero MaxRetry", workers.Task{Type: "t"}, []workers.Option{workers.MaxRetry(0)}, true},
		{"zero Timeout", workers.Task{Type: "t"}, []workers.Option{workers.Timeout(0)}, false},
		{"Timeout at limit", workers.Task{Type: "t"}, []workers.Option{workers.Timeout(workers.MaxTimeout)}, true},
		{"Timeout over limit", workers.Task{Type: "t"}, []workers.Option{workers.Timeout(workers.MaxTimeout + 1)}, false},
		{"negative Delay", workers.Task{Type: "t"}, []workers.Option{workers.Delay(-time.Second)}, false},
		{"ProcessAt in the past", workers.Task{Type: "t"}, []workers.Option{workers.ProcessAt(time.Now().Add(-time.Hour))}, true},
		{"nil option", workers.Task{Type: "t"}, []workers.Option{nil}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := q.Enqueue(context.Background(), tt.task, tt.opts...)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("Enqueue = %v, want nil", err)
			case !tt.ok && !errors.Is(err, workers.ErrBadTask):
				t.Fatalf("Enqueue = %v, want ErrBadTask", err)
			}
		})
	}
}

func testDedupe(t *testing.T, h Harness) {
	q, _ := open(t, h, baseConfig(t))
	ctx := context.Background()
	task := workers.Task{Type: "block", ID: "same"}
	enqueue(t, q, task)
	// Pending: a second Enqueue is a no-op.
	if err := q.Enqueue(ctx, workers.Task{Type: "block", ID: "same", Payload: []byte("other")}); !errors.Is(err, workers.ErrDuplicate) {
		t.Fatalf("Enqueue of a pending ID = %v, want ErrDuplicate", err)
	}
	l := newRecorder()
	release := make(chan struct{})
	mux := workers.NewServeMux()
	mux.HandleFunc("block", func(ctx context.Context, task workers.Task) error {
		l.add("start " + string(task.Payload))
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.add("done " + string(task.Payload))
		return nil
	})
	start(t, q, mux)
	l.waitFor(t, "start ", 1)
	// Running: still a duplicate.
	if err := q.Enqueue(ctx, task); !errors.Is(err, workers.ErrDuplicate) {
		t.Fatalf("Enqueue of a running ID = %v, want ErrDuplicate", err)
	}
	close(release)
	l.waitFor(t, "done ", 1)
	// Finished: the ID is free again. The handler may still be finishing its bookkeeping, so
	// ErrDuplicate is retried until the queue has recorded the task as done.
	waitEnqueue(t, q, workers.Task{Type: "block", ID: "same", Payload: []byte("again")})
	l.waitFor(t, "done again", 1)
	if n := l.count("start other"); n != 0 {
		t.Errorf("the duplicate ran %d times, want 0", n)
	}
}

// waitEnqueue enqueues task, retrying while its ID is still recorded as running (the
// bookkeeping after a handler returns is not synchronous with the handler).
func waitEnqueue(t testing.TB, q workers.Queue, task workers.Task, opts ...workers.Option) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		err := q.Enqueue(context.Background(), task, opts...)
		if err == nil {
			return
		}
		if !errors.Is(err, workers.ErrDuplicate) || time.Now().After(deadline) {
			t.Fatalf("Enqueue(%q) after the task finished = %v, want nil", task.ID, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testDedupeRace(t *testing.T, h Harness) {
	q, _ := open(t, h, baseConfig(t))
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = q.Enqueue(context.Background(), workers.Task{Type: "race", ID: "racy", Payload: fmt.Appendf(nil, "%d", i)})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, workers.ErrDuplicate):
			t.Errorf("concurrent Enqueue = %v, want nil or ErrDuplicate", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent Enqueues of one ID succeeded, want 1", ok, n)
	}
}

func testDelay(t *testing.T, h Harness) {
	q, _ := open(t, h, baseConfig(t))
	l := newRecorder()
	var mu sync.Mutex
	started := map[string]time.Time{}
	mux := workers.NewServeMux()
	mux.HandleFunc("timed", func(ctx context.Context, task workers.Task) error {
		mu.Lock()
		started[task.ID] = time.Now()
		mu.Unlock()
		l.add("run " + task.ID)
		return nil
	})
	start(t, q, mux)
	const delay = 700 * time.Millisecond
	enqueuedAt := time.Now()
	enqueue(t, q, workers.Task{Type: "timed", ID: "delayed"}, workers.Delay(delay))
	at := time.Now().Add(delay)
	enqueue(t, q, workers.Task{Type: "timed", ID: "at"}, workers.ProcessAt(at))
	enqueue(t, q, workers.Task{Type: "timed", ID: "now"})
	l.waitFor(t, "run delayed", 1)
	l.waitFor(t, "run at", 1)
	events := l.snapshot()
	if events[0] != "run now" {
		t.Errorf("run order = %q, want the undelayed task first", events)
	}
	mu.Lock()
	defer mu.Unlock()
	// "Not before" is the guarantee; how much later is not asserted.
	if s := started["delayed"]; s.Before(enqueuedAt.Add(delay)) {
		t.Errorf("Delay(%v) task started %v after Enqueue, want at least the delay", delay, s.Sub(enqueuedAt))
	}
	if s := started["at"]; s.Before(at) {
		t.Errorf("ProcessAt task started %v before its time", at.Sub(s))
	}
}

func testConcurrency(t *testing.T, h Harness) {
	cfg := baseConfig(t)
	cfg.Concurrency = 4
	q, _ := open(t, h, cfg)
	const n = 40
	var mu sync.Mutex
	inFlight, maxInFlight := 0, 0
	runs := map[string]int{}
	full := make(chan struct{}) // closed when Concurrency handlers run at once
	var fullOnce sync.Once
	l := newRecorder()
	mux := workers.NewServeMux()
	mux.HandleFunc("work", func(ctx context.Context, task workers.Task) error {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		runs[task.ID]++
		if inFlight == cfg.Concurrency {
			fullOnce.Do(func() { close(full) })
		}
		mu.Unlock()
		// Hold the first handlers until all slots are busy: proves the tasks really overlap.
		select {
		case <-full:
		case <-ctx.Done():
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		l.add("done")
		return nil
	})
	for i := range n {
		enqueue(t, q, workers.Task{Type: "work", ID: fmt.Sprintf("w%02d", i)})
	}
	stop := start(t, q, mux)
	l.waitFor(t, "done", n)
	stop()
	mu.Lock()
	defer mu.Unlock()
	if maxInFlight != cfg.Concurrency {
		t.Errorf("at most %d handlers ran at once, want exactly Concurrency = %d", maxInFlight, cfg.Concurrency)
	}
	if len(runs) != n {
		t.Errorf("%d distinct tasks ran, want %d", len(runs), n)
	}
	for id, c := range runs {
		if c != 1 {
			t.Errorf("task %s ran %d times, want once", id, c)
		}
	}
}

func testSharedBackend(t *testing.T, h Harness) {
	cfg := baseConfig(t)
	addr := h.New(t)
	q1, q2 := h.Open(t, addr, cfg), h.Open(t, addr, cfg)
	const n = 30
	var mu sync.Mutex
	runs := map[string]int{}
	l := newRecorder()
	mux := workers.NewServeMux()
	mux.HandleFunc("shared", func(ctx context.Context, task workers.Task) error {
		mu.Lock()
		runs[task.ID]++
		mu.Unlock()
		l.add("done")
		return nil
	})
	stop1, stop2 := start(t, q1, mux), start(t, q2, mux)
	for i := range n {
		q := q1
		if i%2 == 1 {
			q = q2
		}
		enqueue(t, q, workers.Task{Type: "shared", ID: fmt.Sprintf("s%02d", i)})
	}
	l.waitFor(t, "done", n)
	stop1()
	stop2()
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if id := fmt.Sprintf("s%02d", i); runs[id] != 1 {
			t.Errorf("task %s ran %d times across two workers, want once", id, runs[id])
		}
	}
}

func testGracefulStop(t *testing.T, h Harness) {
	q, _ := open(t, h, baseConfig(t))
	l := newRecorder()
	release := make(chan struct{})
	var ctxErr error
	mux := workers.NewServeMux()
	mux.HandleFunc("long", func(ctx context.Context, task workers.Task) error {
		l.add("start")
		<-release
		ctxErr = ctx.Err()
		l.add("done")
		return nil
	})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	returned := make(chan error, 1)
	go func() { returned <- q.Run(ctx, mux) }()
	enqueue(t, q, workers.Task{Type: "long", ID: "long"})
	l.waitFor(t, "start", 1)
	cancel(errors.New("queuetest: stop"))
	// Give a broken Run the chance to return before its handler finished. A correct Run passes
	// whatever the pause; this is not a speed assertion.
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-returned:
		close(release)
		t.Fatalf("Run returned (%v) while a handler was still running", err)
	default:
	}
	close(release)
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("Run did not return %v after its handler finished", waitLimit)
	}
	if l.count("done") != 1 {
		t.Fatal("Run returned before the in-flight handler finished")
	}
	if ctxErr != nil {
		t.Errorf("handler ctx ended (%v) when Run was stopped; want it to run on", ctxErr)
	}
	// The task was recorded as done: its ID is free at once.
	if err := q.Enqueue(context.Background(), workers.Task{Type: "long", ID: "long"}); err != nil {
		t.Errorf("Enqueue after a graceful stop = %v, want nil (task recorded as done)", err)
	}
}

func testRunNilMux(t *testing.T, h Harness) {
	q, _ := open(t, h, baseConfig(t))
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("queuetest: already stopped"))
	if err := q.Run(ctx, nil); err == nil {
		t.Fatal("Run(nil mux) = nil, want an error")
	}
}
