package runtime

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// requestLog is what the log line of one request learns while the request is served: the status
// written and, once a handler knows it, the session. It never holds message text.
type requestLog struct {
	http.ResponseWriter
	status int
	note   *requestNote
}

// requestNote is what handlers tell the log line through the request's context (noteSession).
// It is apart from the requestLog so that a context kept past the handler (a parked stream's,
// runner/park) does not keep the server's response writer and connection with it.
type requestNote struct {
	session string
}

// requestLogKey is the context key of the request's *requestNote.
type requestLogKey struct{}

// noteSession records the session a request works on, for its log line.
func noteSession(ctx context.Context, id string) {
	if n, ok := ctx.Value(requestLogKey{}).(*requestNote); ok {
		n.session = id
	}
}

// WriteHeader implements http.ResponseWriter, keeping the first status.
func (rl *requestLog) WriteHeader(code int) {
	if rl.status == 0 {
		rl.status = code
	}
	rl.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter: a write without a status is a 200.
func (rl *requestLog) Write(b []byte) (int, error) {
	if rl.status == 0 {
		rl.status = http.StatusOK
	}
	return rl.ResponseWriter.Write(b)
}

// Flush implements http.Flusher, for the streamed answers.
func (rl *requestLog) Flush() {
	if f, ok := rl.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer (deadlines, flushes).
func (rl *requestLog) Unwrap() http.ResponseWriter { return rl.ResponseWriter }

// logRequest writes the one info line of a served request: method, host, route pattern, status,
// duration and the session when known; never the body.
func (rt *Runtime) logRequest(r *http.Request, rl *requestLog, start time.Time) {
	status := rl.status
	if status == 0 {
		status = http.StatusOK // nothing written: net/http sends 200
	}
	session := rl.note.session
	if session == "" {
		session = r.PathValue("id") // the routes that name a session in their path
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("host", r.Host), slog.String("route", r.Pattern),
		slog.Int("status", status), slog.Duration("duration", time.Since(start)),
	}
	if session != "" {
		attrs = append(attrs, slog.String("session_id", session))
	}
	rt.log.LogAttrs(r.Context(), slog.LevelInfo, "runtime request", attrs...)
}
