package approvals

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// DB is a Store over a gorm database that carries migration 00008.
type DB struct{ db *gorm.DB }

var _ Store = (*DB)(nil)

// NewDB returns a Store over db.
func NewDB(db *gorm.DB) *DB { return &DB{db: db} }

type row struct {
	ID        string `gorm:"primaryKey"`
	AgentID   string
	SessionID string
	ToolName  string
	ToolID    string
	Status    string
	CreatedAt time.Time `gorm:"autoCreateTime:false"`
	ExpiresAt time.Time
	DecidedAt sql.NullTime
}

// TableName names the table for gorm.
func (row) TableName() string { return "approvals" }

func (r row) approval() Approval {
	return Approval{ID: r.ID, AgentID: r.AgentID, SessionID: r.SessionID, ToolName: r.ToolName, ToolID: r.ToolID,
		Status: r.Status, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(), DecidedAt: r.DecidedAt.Time.UTC()}
}

// Create implements Store.
func (s *DB) Create(ctx context.Context, a Approval) error {
	r := row{ID: a.ID, AgentID: a.AgentID, SessionID: a.SessionID, ToolName: a.ToolName, ToolID: a.ToolID,
		Status: a.Status, CreatedAt: a.CreatedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC()}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		return fmt.Errorf("approvals: create %s: %w", a.ID, err)
	}
	return nil
}

// Get implements Store.
func (s *DB) Get(ctx context.Context, id string) (Approval, error) {
	var r row
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return Approval{}, ErrNotFound
	case err != nil:
		return Approval{}, fmt.Errorf("approvals: get %s: %w", id, err)
	}
	return r.approval(), nil
}

// Decide implements Store. The update is conditional on the pending status, so that of two
// deciders (an answer and the timeout, on two runtimes) exactly one wins.
func (s *DB) Decide(ctx context.Context, agentID, sessionID, id, status string, at time.Time) (Approval, error) {
	res := s.db.WithContext(ctx).Model(&row{}).
		Where("id = ? AND agent_id = ? AND session_id = ? AND status = ?", id, agentID, sessionID, Pending).
		Updates(map[string]any{"status": status, "decided_at": at.UTC()})
	if res.Error != nil {
		return Approval{}, fmt.Errorf("approvals: decide %s: %w", id, res.Error)
	}
	a, err := s.Get(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if a.AgentID != agentID || a.SessionID != sessionID {
		return Approval{}, ErrNotFound
	}
	if res.RowsAffected == 0 {
		return a, ErrDecided
	}
	return a, nil
}
