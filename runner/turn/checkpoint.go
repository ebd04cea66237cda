package turn

import (
	"context"
	"strings"
	"sync"
	"time"

	"svc/faults"
	"svc/runner/loop"
	"svc/runner/sessions"
	"svc/runner/sse"
)

// CheckpointEvery is how often a streaming turn stores the text it has streamed so far
// (sessions.State.Partial), so that the death of its process loses at most that much of it.
const CheckpointEvery = time.Second

// FirstCheckpoint is how long into a turn its first checkpoint comes: at the first text delta
// once the turn has run that long, then every CheckpointEvery. A turn killed in its first second
// keeps what it streamed until its last delta after FirstCheckpoint; a turn that ends sooner (an
// echo turn, a short answer) stores nothing extra, so the delay is what keeps short turns at one
// write.
const FirstCheckpoint = 200 * time.Millisecond

// checkpointSink passes frames on and stores the turn's streamed text at its first text delta
// FirstCheckpoint after start, then at the first one each CheckpointEvery after the last store.
type checkpointSink struct {
	next  loop.Sink
	t     *Turn
	ctx   context.Context
	start time.Time // the turn's start
	mu    sync.Mutex
	text  strings.Builder
	saved time.Time // the last store; zero before the first
}

// due reports whether a text delta at now is to be stored.
func (c *checkpointSink) due(now time.Time) bool {
	if c.saved.IsZero() {
		return now.Sub(c.start) >= FirstCheckpoint
	}
	return now.Sub(c.saved) >= CheckpointEvery
}

// Emit implements loop.Sink.
func (c *checkpointSink) Emit(f *sse.Frame) error {
	err := c.next.Emit(f)
	if f.Type != sse.TypeTextDelta {
		return err
	}
	faults.Point("chat.stream")
	c.mu.Lock()
	c.text.WriteString(f.Content)
	var partial string
	if now := time.Now(); c.text.Len() > 0 && c.due(now) {
		c.saved, partial = now, c.text.String()
	}
	c.mu.Unlock()
	if partial != "" {
		c.t.checkpoint(c.ctx, partial)
	}
	return err
}

// checkpoint stores partial as the session's State.Partial. A failure is logged: the turn goes
// on, and its end stores everything.
func (t *Turn) checkpoint(ctx context.Context, partial string) {
	t.l.Lock()
	t.l.S.State.Partial = partial
	t.l.Unlock()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
	defer cancel()
	if err := t.e.cfg.Cache.Persist(pctx, t.l); err != nil {
		t.e.cfg.Logger.WarnContext(ctx, "store a turn's streamed text", "session", t.l.ID, "err", err)
	}
}

// RecoverInterrupted ends the turns that dead processes left running in store (a Store that is a
// sessions.RunningLister; others have nothing to recover): each such session whose turn lock is
// free gets its streamed text as an interrupted answer and goes back to idle
// (sessions.Interrupt). A session whose lock is held has a live turn and is left alone. It
// returns how many sessions it ended.
func RecoverInterrupted(ctx context.Context, store sessions.Store, locker sessions.Locker, now func() time.Time) (int, error) {
	lister, ok := store.(sessions.RunningLister)
	if !ok {
		return 0, nil
	}
	ids, err := lister.Running(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		release, err := locker.TryLock(ctx, id)
		if err != nil {
			continue // a live turn holds it, or the locker is unreachable: its next turn ends it
		}
		s, err := store.Load(ctx, id)
		if err == nil {
			from := len(s.Messages)
			if run := sessions.Interrupt(s, now()); run != nil {
				err = sessions.SaveRun(ctx, store, s, from, run) // recorded as interrupted
				n++
			}
		}
		release()
		if err != nil && ctx.Err() != nil {
			return n, err
		}
	}
	return n, nil
}
