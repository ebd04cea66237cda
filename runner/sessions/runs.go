package sessions

import (
	"context"
	"errors"
	"maps"
	"time"

	"svc/auth"
)

// Run kinds: a chat turn of a client, or a turn an eval runs.
const (
	RunChat = "chat"
	RunEval = "eval"
)

// RunInterrupted is the reason of a run whose process died or lost its turn lock before the run
// ended: Interrupt ends it, at the session's next turn or at a restart. The other reasons are
// those of the done frame (loop.Reason).
const RunInterrupted = "interrupted"

// Run is the record of one chat turn (a run): who asked, on which deployment, with which model,
// how it ended and what it spent. A running turn keeps the part known when it began in
// State.Run, so that a turn its process left running can still be recorded (Interrupt); a Run is
// replaced, never changed in place, so copies of a session may share it.
type Run struct {
	ID        string    `json:"id"`
	AgentID   string    `json:"agent_id,omitempty"`
	DeployID  string    `json:"deploy_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	Kind      string    `json:"kind,omitempty"` // RunChat or RunEval
	StartedAt time.Time `json:"started_at"`
	// Provider and Model are the model the turn ran with.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// UserID and AuthMethod are the verified caller (svc.user.id, svc.auth.method); metadata
	// never sets them.
	UserID     string `json:"user_id,omitempty"`
	AuthMethod string `json:"auth_method,omitempty"`

	// Set when the run ends.
	EndedAt time.Time `json:"-"`
	Reason  string    `json:"-"` // the done frame's reason, or RunInterrupted
	Steps   int       `json:"-"` // model calls (the done frame's turns)
	Usage   Usage     `json:"-"`
	TraceID string    `json:"-"` // the turn span's trace, "" when not traced
	// Metadata is the session's metadata as the turn saw it (spec 2.6).
	Metadata map[string]string `json:"-"`
}

// RunRecorder is optionally implemented by a Store that keeps a record of every run: SaveRun is
// Save, with run recorded in the same transaction, at most once per run ID. A Store that is not
// a RunRecorder (memstore, under svc dev) records no runs.
type RunRecorder interface {
	SaveRun(ctx context.Context, s *Session, from int, run *Run) error
}

// ErrNoTrace is returned by TraceFinder.TraceSession when no run of the agent has the trace id.
var ErrNoTrace = errors.New("sessions: no run has this trace id")

// TraceFinder is optionally implemented by a RunRecorder: TraceSession returns the session of
// agentID's run whose turn was traced as traceID, or ErrNoTrace (also for the run of another
// agent, or a trace id no turn had). POST /feedback checks a trace_id with it. It is safe for
// concurrent use.
type TraceFinder interface {
	TraceSession(ctx context.Context, agentID, traceID string) (sessionID string, err error)
}

// SaveRun is store.Save, recording run with it when run is not nil and store is a RunRecorder.
func SaveRun(ctx context.Context, store Store, s *Session, from int, run *Run) error {
	if rec, ok := store.(RunRecorder); ok && run != nil {
		return rec.SaveRun(ctx, s, from, run)
	}
	return store.Save(ctx, s, from)
}

// interruptedRun is the record of the run that Interrupt ends on s at now: what State.Run kept
// of it, else (a session stored before runs were kept) what the session knows.
func interruptedRun(s *Session, now time.Time) *Run {
	var r Run
	if s.State.Run != nil {
		r = *s.State.Run
	} else {
		r = Run{ID: auth.NewID("run_"), DeployID: s.DeployID, Kind: RunChat, StartedAt: now,
			Provider: s.Model.Provider, Model: s.Model.Model, UserID: s.Owner}
		if n := len(s.Messages); n > 0 && !s.Messages[n-1].At.IsZero() {
			r.StartedAt = s.Messages[n-1].At // the turn's message
		}
	}
	r.AgentID, r.SessionID = s.AgentID, s.ID
	r.EndedAt, r.Reason = now, RunInterrupted
	r.Metadata = maps.Clone(s.Metadata)
	return &r
}
