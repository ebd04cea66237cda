package runtime

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"svc/auth"
	"svc/runner/access"
	"svc/runner/loop"
	"svc/runner/park"
	"svc/runner/sse"
	"svc/runner/streams"
	"svc/runner/turn"
)

// TurnLog keeps the frames of each session's last streamed turn, so that a client may
// reattach (CONTRACT §11): streams/memstream in one process, streams/redisstream across runners.
// Implementations are safe for concurrent use.
type TurnLog interface {
	// Open starts the log of a new turn of session, replacing the last one. stop, when not
	// nil, is what Stop calls (from any process sharing the log) while the turn runs. An error
	// means the turn streams without a log.
	Open(ctx context.Context, session string, stop func()) (streams.Writer, error)
	// Read returns the frames of the session's last turn after id after. With turn empty it
	// does not wait: it answers the turn as it is. With turn set it follows that turn: without
	// a new frame it waits for one, for the end, for ctx (then ctx's error), or for a bound of
	// the backend (an empty batch, not done); when the session's last turn is another, the
	// batch is done and empty. streams.ErrNoTurn: no turn in the last streams.Retention, or
	// the followed turn's log is gone.
	Read(ctx context.Context, session, turn string, after int64) (streams.Batch, error)
	// Stop ends the session's running turn, wherever it runs, with user_abort. false: no turn
	// of the session is running.
	Stop(ctx context.Context, session string) (bool, error)
}

// On-disconnect policies of a chat request ("on_disconnect").
const (
	disconnectAbort    = "abort"
	disconnectContinue = "continue"
)

// checkOnDisconnect validates a chat request's on_disconnect.
func checkOnDisconnect(v string) error {
	switch v {
	case "", disconnectAbort, disconnectContinue:
		return nil
	}
	return invalid("on_disconnect", "must be %q or %q, not %q", disconnectAbort, disconnectContinue, v)
}

// streamTurn streams t as the SSE response to r. The turn runs on a goroutine of its own,
// parked off the HTTP server's connection once it has run for rt.parkAfter (runner/park), in a
// context of the request's values that the client's leaving cancels (with loop.ErrUserAbort),
// unless on_disconnect is "continue"; a stop (POST /chat/sessions/{id}/stop) cancels it too.
// sink makes the turn's sink over the writer; with tee the writer copies each frame it writes
// to the turn's log (otherwise the sink writes the log itself). Headers of the response must be
// set before.
func (rt *Runtime) streamTurn(w http.ResponseWriter, r *http.Request, t *turn.Turn, onDisconnect string, tee bool,
	sink func(sw *sse.Writer, cancel context.CancelCauseFunc, keep bool, log streams.Writer) loop.Sink) {
	ps := park.Begin(w, r)
	keep := onDisconnect == disconnectContinue
	ctx, cancel := context.WithCancelCause(detach(r.Context()))
	lw := rt.openLog(ctx, t.SessionID(), cancel)
	sw := sse.NewWriter(w)
	sw.Now = rt.now
	if tee {
		sw.Tee = lw.Append
	}
	sw.Coalesce()
	if err := sw.Start(); err != nil && !keep {
		cancel(loop.ErrUserAbort)
	}
	move := func(to func() (*park.Conn, error)) error {
		return sw.Move(func() (sse.Dest, error) { return to() })
	}
	gone := func() {
		if !keep {
			cancel(loop.ErrUserAbort)
		}
	}
	ps.Run(rt.parkAfter, move, gone, func() {
		defer cancel(nil)
		defer lw.Close()
		// Detach, not Close: the server flushes the last frames with the end of the response.
		defer sw.Detach() //nolint:errcheck // a client that left is the turn's user_abort, already handled
		t.Cancel = cancel
		t.Run(ctx, sink(sw, cancel, keep, lw))
	})
}

// detach returns a context for a streamed turn: what it reads of its request's context (the
// request log's note, the caller's span), not the request's cancellation, which ends when the
// handler returns (as it does once the stream is parked; the stream learns that its client left
// from park's gone instead), and not the rest of the server's contexts, which
// context.WithoutCancel would keep as long as the turn (about 0.5 KiB of each open stream).
func detach(r context.Context) context.Context {
	ctx := context.Background()
	if n, ok := r.Value(requestLogKey{}).(*requestNote); ok {
		ctx = context.WithValue(ctx, requestLogKey{}, n)
	}
	if sp := trace.SpanFromContext(r); sp.SpanContext().IsValid() {
		ctx = trace.ContextWithSpan(ctx, sp)
	}
	return ctx
}

// openLog opens the turn log of a streamed turn; a log that fails to open is logged and the
// turn streams without one.
func (rt *Runtime) openLog(ctx context.Context, session string, cancel context.CancelCauseFunc) streams.Writer {
	lw, err := rt.turnLog.Open(ctx, session, func() { cancel(loop.ErrUserAbort) })
	if err != nil {
		rt.log.WarnContext(ctx, "open a turn's frame log: the turn cannot be reattached", "session_id", session, "err", err)
		return nopWriter{}
	}
	return lw
}

type nopWriter struct{}

func (nopWriter) Append(int64, []byte) {}
func (nopWriter) Close()               {}

// resumeAfter is the frame id a reconnect has: the Last-Event-ID header, else ?after=, else 0.
func resumeAfter(r *http.Request) (int64, error) {
	field, v := "Last-Event-ID", strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		field, v = "after", r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalid(field, "must be a frame id (a whole number, 0 or more), not %q", v)
	}
	return n, nil
}

// resumeStream serves GET /chat/sessions/{id}/stream: the frames of the session's running or
// last turn after the client's id, then the live tail to done; 204 when no turn ran in the
// last 5 minutes.
func (rt *Runtime) resumeStream(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	// 1. Parse and authorize: another caller's session is 404, as for reading it.
	after, err := resumeAfter(r)
	if err != nil {
		return err
	}
	s, err := visible(rt.turns, r, who)
	if err != nil {
		return err
	}
	// 2. The turn as it is.
	b, err := rt.turnLog.Read(r.Context(), s.ID, "", after)
	if errors.Is(err, streams.ErrNoTurn) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	// 3. Replay, then follow.
	sw := sse.NewWriter(w)
	sw.Coalesce()
	defer sw.Close() //nolint:errcheck // a client that left ends the replay, nothing else
	if err := sw.Start(); err != nil {
		return nil
	}
	for {
		for _, e := range b.Entries {
			if err := sw.WriteEvent(e.ID, e.Data); err != nil {
				return nil
			}
			after = e.ID
		}
		if b.Done {
			return nil
		}
		if len(b.Entries) == 0 {
			if err := sw.Comment("waiting"); err != nil { // the backend's bound passed: keep proxies open
				return nil
			}
		}
		if b, err = rt.turnLog.Read(r.Context(), s.ID, b.Turn, after); err != nil {
			if !errors.Is(err, streams.ErrNoTurn) && r.Context().Err() == nil {
				rt.log.WarnContext(r.Context(), "read a turn's frame log", "session_id", s.ID, "err", err)
			}
			return nil // the log is gone (its runner died before done), the client left, or it failed
		}
	}
}

// resumeAIStream serves GET /chat/ai-stream/{id}/stream, what useChat({resume: true}) calls:
// the session's running or last turn as a UI message stream, from its start (the SDK rebuilds
// the assistant message from the whole stream), then the live tail; 204 when no turn ran in
// the last 5 minutes.
func (rt *Runtime) resumeAIStream(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	s, err := visible(rt.turns, r, who)
	if err != nil {
		return err
	}
	b, err := rt.turnLog.Read(r.Context(), s.ID, "", 0)
	if errors.Is(err, streams.ErrNoTurn) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	w.Header().Set(aiStreamHeader, "v1")
	sw := sse.NewWriter(w)
	sw.Coalesce()
	defer sw.Close() //nolint:errcheck // a client that left ends the replay, nothing else
	if err := sw.Start(); err != nil {
		return nil
	}
	sink := &aiSink{w: sw, cancel: cancel, now: rt.now, buf: make([]byte, 0, 256), messageID: auth.NewID("msg_")}
	var after int64
	for {
		for _, e := range b.Entries {
			f, err := sse.ParseFrame(e.Data)
			if err != nil {
				rt.log.WarnContext(ctx, "replay a logged frame", "session_id", s.ID, "err", err)
				continue
			}
			if err := sink.Emit(&f); err != nil {
				return nil
			}
			after = e.ID
		}
		if b.Done {
			return nil
		}
		if len(b.Entries) == 0 {
			if err := sw.Comment("waiting"); err != nil {
				return nil
			}
		}
		if b, err = rt.turnLog.Read(ctx, s.ID, b.Turn, after); err != nil {
			return nil
		}
	}
}

// stopTurn serves POST /chat/sessions/{id}/stop: the session's running turn ends with
// user_abort, on whichever runner runs it. 200 {"stopped": true}; 409 no_active_turn when no
// turn of the session is running.
func (rt *Runtime) stopTurn(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	s, err := visible(rt.turns, r, who)
	if err != nil {
		return err
	}
	ok, err := rt.turnLog.Stop(r.Context(), s.ID)
	if err != nil {
		return err
	}
	if !ok {
		return &APIError{Code: CodeNoActiveTurn, Message: "no turn of session " + s.ID + " is running"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"session_id": s.ID, "stopped": true})
	return nil
}
