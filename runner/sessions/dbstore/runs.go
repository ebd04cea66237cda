package dbstore

import (
	"fmt"
	"time"

	"svc/runner/sessions"
)

// runRow is a row of the runs table (migration 00013): one per run (chat turn), written with
// the save that stores the turn's result. The platform reads them (registry.Runs).
type runRow struct {
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
	Metadata     string
	StartedAt    time.Time
	EndedAt      time.Time
}

// TableName names the table for gorm.
func (runRow) TableName() string { return "runs" }

func toRunRow(r *sessions.Run) (*runRow, error) {
	meta, err := marshalMap(r.Metadata)
	if err != nil {
		return nil, fmt.Errorf("record run %s: metadata: %w", r.ID, err)
	}
	kind := r.Kind
	if kind == "" {
		kind = sessions.RunChat
	}
	return &runRow{
		ID: r.ID, AgentID: r.AgentID, DeployID: r.DeployID, SessionID: r.SessionID, Kind: kind, Reason: r.Reason,
		Provider: r.Provider, Model: r.Model, Steps: r.Steps,
		InputTokens: int64(r.Usage.InputTokens), OutputTokens: int64(r.Usage.OutputTokens), CachedTokens: int64(r.Usage.CachedTokens),
		TraceID: r.TraceID, UserID: r.UserID, AuthMethod: r.AuthMethod,
		UserKey: r.Metadata["userId"], Screen: r.Metadata["screen"], Metadata: meta,
		StartedAt: r.StartedAt.UTC(), EndedAt: r.EndedAt.UTC(),
	}, nil
}
