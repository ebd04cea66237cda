package runtime

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"svc/registry"
	"svc/runner/access"
	"svc/runner/sessions"
)

// MaxFeedbackComment bounds the comment of POST /feedback, in characters.
const MaxFeedbackComment = 2000

// FeedbackStore keeps the feedback of POST /feedback: registry.FeedbackStore on the platform.
type FeedbackStore interface {
	Add(ctx context.Context, f registry.Feedback) (registry.Feedback, error)
}

// memFeedback keeps the feedback of svc dev in memory: the last maxMemFeedback entries.
type memFeedback struct {
	mu  sync.Mutex
	all []registry.Feedback
}

const maxMemFeedback = 10_000

func (m *memFeedback) Add(_ context.Context, f registry.Feedback) (registry.Feedback, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.all) == maxMemFeedback {
		m.all = m.all[1:]
	}
	m.all = append(m.all, f)
	return f, nil
}

type feedbackBody struct {
	SessionID string `json:"session_id"`
	TraceID   string `json:"trace_id"`
	Rating    string `json:"rating"`
	Comment   string `json:"comment"`
}

// feedback serves POST /feedback: a rating of a turn, kept with the session's latest metadata.
// The turn is named by its session, its trace id (which must be one of this agent's turns), or
// both; either way the caller must be able to see the session (404 otherwise).
func (rt *Runtime) feedback(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var body feedbackBody
	if err := readJSON(w, r, &body); err != nil {
		return err
	}
	switch {
	case body.Rating != "up" && body.Rating != "down":
		return invalid("rating", "must be up or down, got %q", body.Rating)
	case body.SessionID == "" && body.TraceID == "":
		return invalid("session_id", "is required (or trace_id): the session or the trace of the turn rated")
	case utf8.RuneCountInString(body.Comment) > MaxFeedbackComment:
		return invalid("comment", "at most %d characters", MaxFeedbackComment)
	case body.TraceID != "" && !isTraceID(body.TraceID):
		return invalid("trace_id", "want the 32 lower-case hex digits of a done frame's trace_id")
	}
	if body.SessionID != "" {
		if err := checkSessionID("session_id", body.SessionID); err != nil {
			return err
		}
	}
	// A trace id must be one of this agent's turns (a run's, recorded with the turn's result),
	// of the session named when one is: it decides which session the rating is about.
	if body.TraceID != "" {
		sid, err := rt.traceSession(r.Context(), body.TraceID)
		if err != nil {
			return err
		}
		if body.SessionID != "" && body.SessionID != sid {
			return noTrace()
		}
		body.SessionID = sid
	}
	f := registry.Feedback{ID: newFeedbackID(), AgentID: rt.opts.AgentID, SessionID: body.SessionID, TraceID: body.TraceID,
		Rating: body.Rating, Comment: body.Comment, UserID: who.UserID, Metadata: map[string]string{}, CreatedAt: rt.now().UTC()}
	s, err := rt.turns.Get(r.Context(), who, body.SessionID)
	if err != nil {
		return err
	}
	if s.Metadata != nil {
		f.Metadata = s.Metadata
	}
	saved, err := rt.feedbacks.Add(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"feedback_id": saved.ID})
	return nil
}

// traceSession returns the session of this agent's turn traced as traceID: 404 when no turn of
// the agent had it (or the session store keeps no record of traces).
func (rt *Runtime) traceSession(ctx context.Context, traceID string) (string, error) {
	tf, ok := rt.store.(sessions.TraceFinder)
	if !ok {
		return "", noTrace()
	}
	sid, err := tf.TraceSession(ctx, rt.opts.AgentID, traceID)
	if errors.Is(err, sessions.ErrNoTrace) {
		return "", noTrace()
	}
	return sid, err
}

// noTrace is the 404 of a trace_id that is not one of this agent's turns (the same whether the
// trace is another agent's, another session's or no turn's).
func noTrace() *APIError {
	return &APIError{Code: CodeNotFound, Field: "trace_id", Message: "trace_id: no turn of this agent (in this session, when session_id is given) has this trace id"}
}

// isTraceID reports whether s is a W3C trace id as done frames carry it: 32 lower-case hex
// digits, not all zero.
func isTraceID(s string) bool {
	if len(s) != 32 || strings.Count(s, "0") == 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
