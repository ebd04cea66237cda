package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// ErrRunNotFound is returned for a run that does not exist, or belongs to another agent.
var ErrRunNotFound = errors.New("registry: run not found")

// Run is one chat turn of an agent's deployment as the runtimes recorded it
// (runner/sessions/dbstore, in the transaction that stores the turn's result).
type Run struct {
	ID         string            `json:"runId"`
	AgentID    string            `json:"agentId"`
	DeployID   string            `json:"deployId"`
	SessionID  string            `json:"sessionId"`
	Kind       string            `json:"kind" doc:"chat, or eval for a turn an eval ran"`
	Reason     string            `json:"reason" doc:"the done frame's reason (model_stop, max_turns, user_abort, error, budget_exceeded), or interrupted: the turn's process died or lost its turn lock"`
	Provider   string            `json:"provider"`
	Model      string            `json:"model"`
	Steps      int               `json:"steps" doc:"model calls of the turn (the done frame's turns)"`
	Usage      RunUsage          `json:"usage"`
	TraceID    string            `json:"traceId,omitempty" doc:"the turn span's trace id, when the turn was traced"`
	UserID     string            `json:"userId,omitempty" doc:"the verified user of the runtime token (svc.user.id); metadata never sets it"`
	AuthMethod string            `json:"authMethod,omitempty" doc:"how the turn's request was authenticated (svc.auth.method)"`
	Metadata   map[string]string `json:"metadata" doc:"the session's metadata as the turn saw it (spec 2.6)"`
	StartedAt  time.Time         `json:"startedAt"`
	EndedAt    time.Time         `json:"endedAt"`
	DurationMs int64             `json:"durationMs"`
}

// RunUsage is the tokens a run spent.
type RunUsage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	CachedTokens int64 `json:"cachedTokens"`
}

// RunQuery selects an agent's runs. UserKey and Screen match the metadata keys userId and
// screen, SessionID and DeployID the run's session and deployment, when not empty.
type RunQuery struct {
	UserKey   string
	Screen    string
	SessionID string
	DeployID  string
	Limit     int    // 1..500; 0 means 100
	Before    Cursor // the page after this cursor (of this list and agent); the zero Cursor for the first page
}

// RunRow is a row of the runs table (migration 00013): one per run (chat turn), written by the
// runtimes (runner/sessions/dbstore) with the save that stores the turn's result, and read here.
// It is the one description of the table's columns.
type RunRow struct {
	ID           string `gorm:"primaryKey"`
	AgentID      string
	DeployID     string
	SessionID    string
	Kind         string
	Reason       string
	Provider     string
	Model        string
	Steps        int
	InputTokens  int64
	OutputTokens int64
	CachedTokens int64
	TraceID      string
	UserID       string
	AuthMethod   string
	UserKey      string // metadata userId
	Screen       string // metadata screen
	Metadata     string // a JSON object of strings
	StartedAt    time.Time
	EndedAt      time.Time
}

// TableName names the table of RunRow.
func (RunRow) TableName() string { return "runs" }

// InsertSQL is the statement that inserts r unless a run of its id is recorded already, and args
// with its arguments appended (placeholders ?): for a writer that sends it with other statements
// in one round trip, as the body of a data-modifying WITH on Postgres (runner/sessions/dbstore).
func (r *RunRow) InsertSQL(args []any) (string, []any) {
	return "INSERT INTO runs (id, agent_id, deploy_id, session_id, kind, reason, provider, model, steps, " +
			"input_tokens, output_tokens, cached_tokens, trace_id, user_id, auth_method, user_key, screen, metadata, started_at, ended_at) " +
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
		append(args, r.ID, r.AgentID, r.DeployID, r.SessionID, r.Kind, r.Reason, r.Provider, r.Model, r.Steps,
			r.InputTokens, r.OutputTokens, r.CachedTokens, r.TraceID, r.UserID, r.AuthMethod, r.UserKey, r.Screen, r.Metadata,
			r.StartedAt, r.EndedAt)
}

// Runs reads the runs the runtimes record in the platform database. Safe for concurrent use.
type Runs struct{ db *gorm.DB }

// NewRuns returns the run reader over db.
func NewRuns(db *gorm.DB) *Runs { return &Runs{db: db} }

// List is Page without the next cursor: the first page of the agent's runs that q selects,
// or the page after q.Before.
func (s *Runs) List(ctx context.Context, agentID string, q RunQuery) ([]Run, error) {
	items, _, err := s.Page(ctx, agentID, q)
	return items, err
}

// Page returns a page of an agent's runs that q selects, newest (by start, then by id) first,
// and the cursor of the next page: the zero Cursor when this page is the last. A q.Before of
// another list or agent is ErrBadCursor.
func (s *Runs) Page(ctx context.Context, agentID string, q RunQuery) ([]Run, Cursor, error) {
	tx := s.db.WithContext(ctx).Model(&RunRow{}).Where("agent_id = ?", agentID)
	for _, f := range [...]struct{ col, v string }{{"user_key", q.UserKey}, {"screen", q.Screen}, {"session_id", q.SessionID}, {"deploy_id", q.DeployID}} {
		if f.v != "" {
			tx = tx.Where(f.col+" = ?", f.v)
		}
	}
	tx, err := wherePage(tx, CursorRuns, agentID, "started_at", q.Before, q.Limit)
	if err != nil {
		return nil, Cursor{}, err
	}
	var rows []RunRow
	if err := tx.Find(&rows).Error; err != nil {
		return nil, Cursor{}, fmt.Errorf("list runs: %w", err)
	}
	out := make([]Run, 0, len(rows))
	for i := range rows {
		r, err := rows[i].run()
		if err != nil {
			return nil, Cursor{}, err
		}
		out = append(out, r)
	}
	out, next := nextCursor(out, CursorRuns, agentID, q.Limit, func(r *Run) (time.Time, string) { return r.StartedAt, r.ID })
	return out, next, nil
}

// Get returns the agent's run id, or ErrRunNotFound.
func (s *Runs) Get(ctx context.Context, agentID, id string) (Run, error) {
	var rows []RunRow
	err := s.db.WithContext(ctx).Where("id = ? AND agent_id = ?", id, agentID).Limit(1).Find(&rows).Error
	if err != nil {
		return Run{}, fmt.Errorf("get run: %w", err)
	}
	if len(rows) == 0 {
		return Run{}, ErrRunNotFound
	}
	return rows[0].run()
}

func (r *RunRow) run() (Run, error) {
	out := Run{ID: r.ID, AgentID: r.AgentID, DeployID: r.DeployID, SessionID: r.SessionID, Kind: r.Kind, Reason: r.Reason,
		Provider: r.Provider, Model: r.Model, Steps: r.Steps,
		Usage:   RunUsage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CachedTokens: r.CachedTokens},
		TraceID: r.TraceID, UserID: r.UserID, AuthMethod: r.AuthMethod,
		StartedAt: r.StartedAt.UTC(), EndedAt: r.EndedAt.UTC(), DurationMs: r.EndedAt.Sub(r.StartedAt).Milliseconds()}
	if err := json.Unmarshal([]byte(r.Metadata), &out.Metadata); err != nil {
		return Run{}, fmt.Errorf("read run %s: metadata: %w", r.ID, err)
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	return out, nil
}
