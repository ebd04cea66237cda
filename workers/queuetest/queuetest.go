package queuetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"svc/workers"
)

// Config is what the suite asks of a queue under test; Harness.Open maps it onto the
// implementation's own config.
type Config struct {
	// Concurrency is the number of tasks one Run processes at once.
	Concurrency int
	// PollInterval is how often an idle Run looks for work.
	PollInterval time.Duration
	// RetryBase is the first retry delay.
	RetryBase time.Duration
	// Lease is how long a claim lasts without a heartbeat; implementations whose lease is fixed
	// ignore it (and provide Harness.ExpireLeases).
	Lease time.Duration
	// Logger receives the queue's logs.
	Logger *slog.Logger
}

// Harness connects the suite to one implementation.
type Harness struct {
	// New creates a fresh, private backend for tb (a database, a Redis queue name), removed when
	// tb ends, and returns its address: a string Open understands, in this process or in another.
	New func(tb testing.TB) string
	// Open returns a queue on the backend at addr with cfg, closed when tb ends. Queues opened on
	// one address share their tasks.
	Open func(tb testing.TB, addr string, cfg Config) workers.Queue
	// ExpireLeases, when set, makes every lease currently held on the backend at addr look
	// expired, for implementations whose lease cannot be shortened. When nil, the crash test
	// waits for Config.Lease to run out.
	ExpireLeases func(tb testing.TB, addr string)
}

// waitLimit turns a hang into a failure; it is not a speed requirement.
const waitLimit = time.Minute

// baseConfig is the suite's usual config: short intervals so that the suite is quick.
func baseConfig(tb testing.TB) Config {
	return Config{
		Concurrency:  4,
		PollInterval: 20 * time.Millisecond,
		RetryBase:    10 * time.Millisecond,
		Lease:        2 * time.Second,
		Logger:       testLogger(tb),
	}
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Run runs the conformance suite against h, its tests in parallel (each on its own backend).
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"EnqueueAndProcess", testEnqueueAndProcess},
		{"BadTask", testBadTask},
		{"Dedupe", testDedupe},
		{"DedupeRace", testDedupeRace},
		{"RetryThenSuccess", testRetryThenSuccess},
		{"MaxRetryFails", testMaxRetryFails},
		{"SkipRetry", testSkipRetry},
		{"PanicRecovered", testPanic},
		{"NoHandler", testNoHandler},
		{"Timeout", testTimeout},
		{"Delay", testDelay},
		{"Stats", testStats},
		{"Concurrency", testConcurrency},
		{"SharedBackend", testSharedBackend},
		{"GracefulStop", testGracefulStop},
		{"RunNilMux", testRunNilMux},
		{"Crash", func(t *testing.T, h Harness) { testCrash(t, h, false) }},
		{"CrashOnLastAttempt", func(t *testing.T, h Harness) { testCrash(t, h, true) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // every test has its own backend; -parallel bounds how many run at once
			tt.fn(t, h)
		})
	}
}

// open makes a fresh backend and one queue on it.
func open(t testing.TB, h Harness, cfg Config) (workers.Queue, string) {
	t.Helper()
	addr := h.New(t)
	return h.Open(t, addr, cfg), addr
}

// start runs q.Run in a goroutine and returns a stop function that cancels it and waits for it to
// return; stop also runs when t ends.
func start(t testing.TB, q workers.Queue, mux *workers.ServeMux) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, mux) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel(errors.New("queuetest: stop"))
			if err := <-done; err != nil {
				t.Errorf("Run = %v, want nil after ctx is done", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func enqueue(t testing.TB, q workers.Queue, task workers.Task, opts ...workers.Option) {
	t.Helper()
	if err := q.Enqueue(context.Background(), task, opts...); err != nil {
		t.Fatalf("Enqueue(%q, %q) = %v", task.Type, task.ID, err)
	}
}

// testStats: a queue that reports its stats counts the tasks due and not claimed, and the age
// of the oldest; a delayed task is not due yet.
func testStats(t *testing.T, h Harness) {
	q := h.Open(t, h.New(t), baseConfig(t))
	sr, ok := q.(workers.StatsReporter)
	if !ok {
		t.Skip("this queue does not report stats") // an optional ability
	}
	ctx := context.Background()
	if st, err := sr.Stats(ctx); err != nil || st.Pending != 0 || st.Oldest != 0 {
		t.Fatalf("empty queue: %+v, %v", st, err)
	}
	for i, opts := range [][]workers.Option{nil, nil, {workers.Delay(time.Hour)}} {
		if err := q.Enqueue(ctx, workers.Task{Type: "stats", ID: fmt.Sprint("s", i), Payload: []byte("{}")}, opts...); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	st, err := sr.Stats(ctx)
	if err != nil || st.Pending != 2 || st.Oldest <= 0 || st.Oldest > waitLimit {
		t.Errorf("stats %+v, %v: want 2 pending, the oldest due for a moment", st, err)
	}
}
