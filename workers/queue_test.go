package workers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"svc/workers"
)

func TestRetryDelay(t *testing.T) {
	base := 10 * time.Millisecond
	tests := []struct {
		failure int
		full    time.Duration // before jitter
	}{
		{0, base}, // treated as the first failure
		{1, base},
		{2, 2 * base},
		{3, 4 * base},
		{10, 512 * base},
		{13, 4096 * base},
		{14, workers.MaxRetryDelay}, // 8192 × 10ms is past the cap
		{1000, workers.MaxRetryDelay},
	}
	for _, tt := range tests {
		for range 50 {
			got := workers.RetryDelay(base, tt.failure)
			if got < tt.full/2 || got > tt.full {
				t.Fatalf("RetryDelay(%v, %d) = %v, want in [%v, %v]", base, tt.failure, got, tt.full/2, tt.full)
			}
		}
	}
	if got := workers.RetryDelay(0, 1); got < workers.DefaultRetryBase/2 || got > workers.DefaultRetryBase {
		t.Errorf("RetryDelay(0, 1) = %v, want around DefaultRetryBase", got)
	}
}

func TestResolveOptions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o, err := workers.ResolveOptions(now)
	if err != nil || o.MaxRetry != workers.DefaultMaxRetry || o.Timeout != workers.DefaultTimeout || !o.ProcessAt.IsZero() {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
	o, err = workers.ResolveOptions(now, workers.ProcessAt(now.Add(time.Hour)), workers.Delay(time.Minute))
	if err != nil || !o.ProcessAt.Equal(now.Add(time.Minute)) {
		t.Errorf("ProcessAt then Delay: ProcessAt = %v, %v; want the later option (now+1m)", o.ProcessAt, err)
	}
	o, err = workers.ResolveOptions(now, workers.Delay(time.Minute), workers.ProcessAt(now.Add(time.Hour)))
	if err != nil || !o.ProcessAt.Equal(now.Add(time.Hour)) {
		t.Errorf("Delay then ProcessAt: ProcessAt = %v, %v; want the later option (now+1h)", o.ProcessAt, err)
	}
	o, err = workers.ResolveOptions(now, workers.Delay(0))
	if err != nil || !o.ProcessAt.IsZero() {
		t.Errorf("Delay(0): ProcessAt = %v, %v; want zero (now)", o.ProcessAt, err)
	}
	_, err = workers.ResolveOptions(now, workers.MaxRetry(-1), workers.Timeout(-1))
	if !errors.Is(err, workers.ErrBadTask) || !strings.Contains(err.Error(), "MaxRetry") || !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("two bad options: err = %v, want ErrBadTask naming both", err)
	}
}

func TestServeMux(t *testing.T) {
	mux := workers.NewServeMux()
	var got workers.Task
	mux.HandleFunc("a", func(ctx context.Context, task workers.Task) error {
		got = task
		return nil
	})
	mux.Handle("boom", workers.HandlerFunc(func(context.Context, workers.Task) error {
		var m map[string]int
		m["x"] = 1 // a runtime panic, not a call to panic
		return nil
	}))
	task := workers.Task{Type: "a", ID: "1", Payload: []byte("p")}
	if err := mux.ProcessTask(context.Background(), task); err != nil || got.ID != "1" {
		t.Fatalf("ProcessTask = %v, task %+v", err, got)
	}
	if err := mux.ProcessTask(context.Background(), workers.Task{Type: "zzz"}); !errors.Is(err, workers.ErrNoHandler) || !strings.Contains(err.Error(), "zzz") {
		t.Errorf("unknown type: %v, want ErrNoHandler naming it", err)
	}
	err := mux.ProcessTask(context.Background(), workers.Task{Type: "boom"})
	if !errors.Is(err, workers.ErrPanic) || !strings.Contains(err.Error(), "queue_test.go:") {
		t.Errorf("panic: %v, want ErrPanic naming the panicking line of queue_test.go", err)
	}
	var zero workers.ServeMux // the zero value works
	zero.HandleFunc("a", func(context.Context, workers.Task) error { return nil })
	if err := zero.ProcessTask(context.Background(), workers.Task{Type: "a"}); err != nil {
		t.Errorf("zero ServeMux: %v", err)
	}
}

// failureRecorder is a FailureHandler that records what it is told.
type failureRecorder struct {
	told   []string
	panics bool
}

func (f *failureRecorder) ProcessTask(context.Context, workers.Task) error { return nil }

func (f *failureRecorder) TaskFailed(_ context.Context, t workers.Task, err error) {
	if f.panics {
		panic("bookkeeping bug")
	}
	f.told = append(f.told, t.ID+": "+err.Error())
}

func TestServeMuxFail(t *testing.T) {
	ctx := context.Background()
	mux := workers.NewServeMux()
	rec := &failureRecorder{}
	mux.Handle("owned", rec)
	mux.HandleFunc("plain", func(context.Context, workers.Task) error { return nil })
	mux.Handle("buggy", &failureRecorder{panics: true})

	if err := mux.Fail(ctx, workers.Task{Type: "owned", ID: "1"}, errors.New("boom")); err != nil || len(rec.told) != 1 || rec.told[0] != "1: boom" {
		t.Errorf("Fail to a FailureHandler = %v, told %q; want it told once", err, rec.told)
	}
	for _, typ := range []string{"plain", "unknown"} {
		if err := mux.Fail(ctx, workers.Task{Type: typ}, errors.New("boom")); err != nil {
			t.Errorf("Fail of a %s task = %v, want nil (nobody to tell)", typ, err)
		}
	}
	if len(rec.told) != 1 {
		t.Errorf("a FailureHandler was told of another type's failure: %q", rec.told)
	}
	err := mux.Fail(ctx, workers.Task{Type: "buggy"}, errors.New("boom"))
	if !errors.Is(err, workers.ErrPanic) || !strings.Contains(err.Error(), "bookkeeping bug") {
		t.Errorf("Fail with a panicking TaskFailed = %v, want ErrPanic naming the panic", err)
	}
}

func TestServeMuxPanicsOnWiringMistakes(t *testing.T) {
	tests := []struct {
		name string
		fn   func(m *workers.ServeMux)
	}{
		{"duplicate", func(m *workers.ServeMux) {
			m.HandleFunc("a", func(context.Context, workers.Task) error { return nil })
		}},
		{"empty type", func(m *workers.ServeMux) {
			m.HandleFunc("", func(context.Context, workers.Task) error { return nil })
		}},
		{"nil handler", func(m *workers.ServeMux) { m.Handle("b", nil) }},
		{"nil func", func(m *workers.ServeMux) { m.HandleFunc("c", nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := workers.NewServeMux()
			m.HandleFunc("a", func(context.Context, workers.Task) error { return nil })
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.fn(m)
		})
	}
}

func TestAttempt(t *testing.T) {
	if n := workers.Attempt(context.Background()); n != 0 {
		t.Errorf("Attempt outside a handler = %d, want 0", n)
	}
	if n := workers.Attempt(workers.WithAttempt(context.Background(), 3)); n != 3 {
		t.Errorf("Attempt = %d, want 3", n)
	}
}
