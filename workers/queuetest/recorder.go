package queuetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"svc/workers"
)

// recorder records what handlers saw, and the failures they were told of, and lets the test wait
// for it.
type recorder struct {
	mu      sync.Mutex
	events  []string
	errs    map[string][]error // errors given to TaskFailed, by task ID
	tasks   map[string][]workers.Task
	changed chan struct{} // closed and replaced on every change
}

func newRecorder() *recorder {
	return &recorder{errs: map[string][]error{}, tasks: map[string][]workers.Task{}, changed: make(chan struct{})}
}

func (l *recorder) add(ev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	close(l.changed)
	l.changed = make(chan struct{})
}

// handle registers fn for taskType on mux as a workers.FailureHandler whose TaskFailed calls l
// records.
func (l *recorder) handle(mux *workers.ServeMux, taskType string, fn workers.HandlerFunc) {
	mux.Handle(taskType, recordingHandler{HandlerFunc: fn, l: l})
}

// recordingHandler is a handler of the suite that records the failures it is told of.
type recordingHandler struct {
	workers.HandlerFunc
	l *recorder
}

var _ workers.FailureHandler = recordingHandler{}

// TaskFailed implements workers.FailureHandler.
func (h recordingHandler) TaskFailed(ctx context.Context, t workers.Task, err error) {
	h.l.failed(t, err)
}

// failed records that t failed for good with err.
func (l *recorder) failed(t workers.Task, err error) {
	l.mu.Lock()
	l.errs[t.ID] = append(l.errs[t.ID], err)
	l.tasks[t.ID] = append(l.tasks[t.ID], t)
	l.mu.Unlock()
	l.add("failed " + t.ID)
}

func (l *recorder) failures(id string) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs[id])
}

func (l *recorder) count(ev string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e == ev {
			n++
		}
	}
	return n
}

func (l *recorder) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// waitFor waits until ev has happened n times.
func (l *recorder) waitFor(t testing.TB, ev string, n int) {
	t.Helper()
	l.waitWithin(t, ev, n, waitLimit)
}

// waitWithin waits until ev has happened n times, failing after limit.
func (l *recorder) waitWithin(t testing.TB, ev string, n int, limit time.Duration) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		got := 0
		for _, e := range l.events {
			if e == ev {
				got++
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waited %v for %d × %q; events: %q", limit, n, ev, l.snapshot())
		}
	}
}
