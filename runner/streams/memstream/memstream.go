// Package memstream keeps the per-turn frame logs of streams in memory, for one process.
package memstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"svc/runner/streams"
)

// Config configures a Log. The zero value is usable.
type Config struct {
	// Retention keeps a log after its turn ended; 0 means streams.Retention.
	Retention time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Log keeps the last turn of each session. Logs expire without timers or goroutines: a read
// of an expired log finds nothing, and Open sweeps the expired ones at most once per
// Retention/5. It is safe for concurrent use; a turn's frames take only that turn's lock.
type Log struct {
	cfg       Config
	mu        sync.Mutex // guards logs and lastSweep; taken before a turnLog's mu, never after
	logs      map[string]*turnLog
	lastSweep time.Time
}

// turnLog is the log of one turn. Frames live back to back in arena; frame i ends at ends[i].
type turnLog struct {
	turn    string    // set at Open, never changed
	started time.Time // set at Open, never changed
	mu      sync.Mutex
	arena   []byte
	ends    []int
	ids     []int64
	done    bool
	doneAt  time.Time
	wake    chan struct{} // closed by the next append or Close; nil until a reader waits
	stop    func()
}

// New returns an empty Log.
func New(cfg Config) *Log {
	if cfg.Retention <= 0 {
		cfg.Retention = streams.Retention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Log{cfg: cfg, logs: map[string]*turnLog{}}
}

// Len is the number of logs kept, expired ones not yet swept included.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.logs)
}

// Open starts the log of a new turn of session, replacing the last. stop, when not nil, is
// what Stop calls while the turn runs.
func (l *Log) Open(_ context.Context, session string, stop func()) (streams.Writer, error) {
	return l.OpenTurn(session, newTurnID(), stop), nil
}

// OpenTurn is Open with the turn's id given (unique to the turn).
func (l *Log) OpenTurn(session, turn string, stop func()) streams.Writer {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Now()
	t := &turnLog{turn: turn, started: now, stop: stop, arena: make([]byte, 0, 256)} // grows as the turn streams: an open stream waiting on its model holds two or three frames
	if now.Sub(l.lastSweep) >= l.cfg.Retention/5 {
		l.lastSweep = now
		for id, old := range l.logs {
			old.mu.Lock()
			if l.expired(old, now) {
				delete(l.logs, id)
			}
			old.mu.Unlock()
		}
	}
	if old := l.logs[session]; old != nil {
		old.mu.Lock()
		l.closeLocked(old) // a turn replaced while running (its process lost the lock) ends here
		old.mu.Unlock()
	}
	l.logs[session] = t
	return &writer{l: l, t: t}
}

// Turn describes a session's last turn.
type Turn struct {
	ID      string
	Started time.Time
	Done    bool
}

// Last describes the session's last turn; false when none ran in the last Retention.
func (l *Log) Last(session string) (Turn, bool) {
	l.mu.Lock()
	t := l.logs[session]
	l.mu.Unlock()
	if t == nil {
		return Turn{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.expired(t, l.cfg.Now()) {
		return Turn{}, false
	}
	return Turn{ID: t.turn, Started: t.started, Done: t.done}, true
}

// expired reports whether t's retention passed; t.mu is held.
func (l *Log) expired(t *turnLog, now time.Time) bool {
	return t.done && now.Sub(t.doneAt) >= l.cfg.Retention
}

// Read returns the frames of the session's last turn after id after. With turn set and the
// session's last turn another, the batch is done and empty. Without a new frame it waits for
// one, or for the turn's end, or for ctx (then it returns ctx's error). streams.ErrNoTurn: no
// turn of the session in the last Retention.
func (l *Log) Read(ctx context.Context, session, turn string, after int64) (streams.Batch, error) {
	for {
		l.mu.Lock()
		t := l.logs[session]
		l.mu.Unlock()
		if t == nil {
			return streams.Batch{}, streams.ErrNoTurn
		}
		if turn != "" && t.turn != turn {
			return streams.Batch{Turn: t.turn, Done: true}, nil
		}
		t.mu.Lock()
		if l.expired(t, l.cfg.Now()) {
			t.mu.Unlock()
			return streams.Batch{}, streams.ErrNoTurn
		}
		b := streams.Batch{Turn: t.turn, Done: t.done}
		for i, id := range t.ids {
			if id <= after {
				continue
			}
			start := 0
			if i > 0 {
				start = t.ends[i-1]
			}
			b.Entries = append(b.Entries, streams.Entry{ID: id, Data: t.arena[start:t.ends[i]:t.ends[i]]})
		}
		if len(b.Entries) > 0 || b.Done || turn == "" {
			t.mu.Unlock()
			return b, nil
		}
		if t.wake == nil {
			t.wake = make(chan struct{})
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return streams.Batch{}, ctx.Err()
		}
		turn = b.Turn
	}
}

// Stop calls the stop function of the session's running turn. It reports whether a turn was
// running.
func (l *Log) Stop(_ context.Context, session string) (bool, error) {
	l.mu.Lock()
	t := l.logs[session]
	l.mu.Unlock()
	var stop func()
	if t != nil {
		t.mu.Lock()
		if !t.done {
			stop = t.stop
		}
		t.mu.Unlock()
	}
	if stop == nil {
		return false, nil
	}
	stop()
	return true, nil
}

// closeLocked ends t; t.mu is held.
func (l *Log) closeLocked(t *turnLog) {
	if t.done {
		return
	}
	t.done, t.doneAt, t.stop = true, l.cfg.Now(), nil
	t.arena = t.arena[:len(t.arena):len(t.arena)] // readers' slices stay valid; no spare capacity kept
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
}

var _ streams.Writer = (*writer)(nil)

// writer is the streams.Writer of one turn.
type writer struct {
	l *Log
	t *turnLog
}

// Append implements streams.Writer. Ids must increase; a repeated or smaller one is dropped.
func (w *writer) Append(id int64, data []byte) {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done || (len(t.ids) > 0 && id <= t.ids[len(t.ids)-1]) {
		return
	}
	t.arena = append(t.arena, data...)
	t.ends = append(t.ends, len(t.arena))
	t.ids = append(t.ids, id)
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
}

// Close implements streams.Writer.
func (w *writer) Close() {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	w.l.closeLocked(w.t)
}

func newTurnID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24)
	return hex.EncodeToString(b[:])
}
