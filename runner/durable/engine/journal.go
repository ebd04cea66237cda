package engine

import (
	"context"
	"encoding/json"
	"sync"

	"svc/runner/durable"
)

// journalWriter writes an execution's journal entries in the background, in order, as group
// commits: a step does not wait for its entry's commit (a commit that takes a millisecond would
// otherwise bound every handler to a step per millisecond), entries recorded while one commit is
// in flight go in the next, and Flush waits for everything recorded so far. Flush runs before
// every child call, whose effects reach outside the run, and before the execution's outcome is
// stored; a process that dies in between loses at most the entries of calls with no effect
// outside the run (steps, now, random) not committed yet, which its replay runs again.
//
// Every write is fenced twice: the store writes only while the run runs under the execution's
// attempt (another claim makes it ErrStale), and the writer writes nothing once fence reports
// that the execution's lease ended, even before anyone claimed the run.
type journalWriter struct {
	runs    durable.Store
	id      string
	attempt int
	fence   func() error // returns nil while the execution holds its run

	mu      sync.Mutex // guards pending and err
	pending []durable.Entry
	err     error // the first failed write: later Records and Flushes return it

	write  sync.Mutex // one write at a time, so entries reach the store in order
	signal chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

func newJournalWriter(ctx context.Context, runs durable.Store, run durable.Run, fence func() error) *journalWriter {
	w := &journalWriter{runs: runs, id: run.ID, attempt: run.Attempt, fence: fence,
		signal: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop(ctx)
	return w
}

// Record keeps e for the background writer.
func (w *journalWriter) Record(_ context.Context, key string, value json.RawMessage, e durable.Entry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	e.Key, e.Value = key, value
	w.pending = append(w.pending, e)
	select {
	case w.signal <- struct{}{}:
	default: // a write is due already
	}
	return nil
}

func (w *journalWriter) loop(ctx context.Context) {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case <-w.signal:
			_ = w.Flush(ctx) // an error is kept for the next Record or Flush
		}
	}
}

// Flush writes every entry recorded so far and returns the first write error, if any.
func (w *journalWriter) Flush(ctx context.Context) error {
	w.write.Lock()
	defer w.write.Unlock()
	w.mu.Lock()
	batch, err := w.pending, w.err
	w.pending = nil
	w.mu.Unlock()
	if err != nil || len(batch) == 0 {
		return err
	}
	err = w.fence()
	if err == nil {
		err = w.runs.RecordAll(ctx, w.id, w.attempt, batch)
	}
	if err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
		return err
	}
	return nil
}

// Close stops the background writer, then writes what is left.
func (w *journalWriter) Close(ctx context.Context) error {
	close(w.stop)
	<-w.done
	return w.Flush(ctx)
}
