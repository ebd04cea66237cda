package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"svc/auth"
)

// States of an eval run; the last three are final, and the states of the svc/evals commit status.
const (
	EvalQueued  = "queued"
	EvalRunning = "running"
	EvalSuccess = "success"
	EvalFailure = "failure"
	EvalError   = "error"
)

// EvalRun is one run of a deployment's evals.
type EvalRun struct {
	ID         string          `json:"evalRunId"`
	AgentID    string          `json:"agentId"`
	DeployID   string          `json:"deployId"`
	CommitSHA  string          `json:"commit,omitempty"`
	State      string          `json:"state"`
	Result     json.RawMessage `json:"result"`
	Error      string          `json:"error,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	FinishedAt *time.Time      `json:"finishedAt,omitempty"`
}

// ErrNoEvalRun is returned when a deployment has no eval run.
var ErrNoEvalRun = errors.New("registry: no eval run")

type evalRunRow struct {
	ID         string `gorm:"primaryKey"`
	AgentID    string
	DeployID   string
	CommitSHA  string
	State      string
	Result     string
	Error      string
	CreatedAt  time.Time `gorm:"autoCreateTime:false"`
	FinishedAt sql.NullTime
}

func (evalRunRow) TableName() string { return "eval_runs" }

func (r evalRunRow) run() EvalRun {
	out := EvalRun{ID: r.ID, AgentID: r.AgentID, DeployID: r.DeployID, CommitSHA: r.CommitSHA, State: r.State,
		Result: json.RawMessage(r.Result), Error: r.Error, CreatedAt: r.CreatedAt.UTC()}
	if r.FinishedAt.Valid {
		t := r.FinishedAt.Time.UTC()
		out.FinishedAt = &t
	}
	return out
}

// EvalRuns keeps eval runs. Safe for concurrent use.
type EvalRuns struct{ db *gorm.DB }

// NewEvalRuns returns the eval run store over db.
func NewEvalRuns(db *gorm.DB) *EvalRuns { return &EvalRuns{db: db} }

// Create records a queued run of deployment deployID's evals.
func (s *EvalRuns) Create(ctx context.Context, agentID, deployID, commit string) (EvalRun, error) {
	r := evalRunRow{ID: auth.NewID("ev"), AgentID: agentID, DeployID: deployID, CommitSHA: commit, State: EvalQueued, Result: "{}", CreatedAt: time.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		return EvalRun{}, fmt.Errorf("create eval run: %w", err)
	}
	return r.run(), nil
}

// Get returns the run of id.
func (s *EvalRuns) Get(ctx context.Context, id string) (EvalRun, error) {
	var r evalRunRow
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return EvalRun{}, ErrNoEvalRun
	}
	if err != nil {
		return EvalRun{}, fmt.Errorf("get eval run: %w", err)
	}
	return r.run(), nil
}

// Latest returns the newest run of a deployment's evals, or ErrNoEvalRun.
func (s *EvalRuns) Latest(ctx context.Context, deployID string) (EvalRun, error) {
	var r evalRunRow
	err := s.db.WithContext(ctx).Where("deploy_id = ?", deployID).Order("created_at DESC, id DESC").Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return EvalRun{}, ErrNoEvalRun
	}
	if err != nil {
		return EvalRun{}, fmt.Errorf("latest eval run: %w", err)
	}
	return r.run(), nil
}

// SetRunning marks a run as running.
func (s *EvalRuns) SetRunning(ctx context.Context, id string) error {
	if err := s.db.WithContext(ctx).Model(&evalRunRow{}).Where("id = ?", id).Update("state", EvalRunning).Error; err != nil {
		return fmt.Errorf("start eval run: %w", err)
	}
	return nil
}

// Finish records a run's final state, its result (JSON) and, for state error, why.
func (s *EvalRuns) Finish(ctx context.Context, id, state string, result json.RawMessage, why string) error {
	if len(result) == 0 {
		result = json.RawMessage("{}")
	}
	err := s.db.WithContext(ctx).Model(&evalRunRow{}).Where("id = ?", id).
		Updates(map[string]any{"state": state, "result": string(result), "error": why, "finished_at": time.Now().UTC()}).Error
	if err != nil {
		return fmt.Errorf("finish eval run: %w", err)
	}
	return nil
}
