package runtime

import (
	"context"
	"maps"
	"net/http"
	"sync"
	"unicode/utf8"

	"svc/registry"
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
func (rt *Runtime) feedback(w http.ResponseWriter, r *http.Request, c *caller) error {
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
	case len(body.TraceID) > MaxSessionIDLen:
		return invalid("trace_id", "at most %d characters", MaxSessionIDLen)
	}
	f := registry.Feedback{ID: newFeedbackID(), AgentID: rt.opts.AgentID, SessionID: body.SessionID, TraceID: body.TraceID,
		Rating: body.Rating, Comment: body.Comment, UserID: c.userID, Metadata: map[string]string{}, CreatedAt: rt.now().UTC()}
	if body.SessionID != "" {
		if err := checkSessionID("session_id", body.SessionID); err != nil {
			return err
		}
		l, err := rt.visibleSession(r.Context(), c, body.SessionID)
		if err != nil {
			return err
		}
		l.Lock()
		meta := maps.Clone(l.S.Metadata)
		l.Unlock()
		rt.cache.Done(l)
		if meta != nil {
			f.Metadata = meta
		}
	}
	saved, err := rt.feedbacks.Add(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"feedback_id": saved.ID})
	return nil
}
