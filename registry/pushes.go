package registry

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Push is a push that arrived for an agent and built nothing (autoDeploy off): its source is recorded.
type Push struct {
	ID        int64 `gorm:"primaryKey"`
	AgentID   string
	Branch    string
	CommitSHA string
	Pusher    string
	Message   string
	CreatedAt time.Time
}

// TableName names the table of Push.
func (Push) TableName() string { return "pushes" }

// Pushes records pushes. Safe for concurrent use.
type Pushes struct {
	db *gorm.DB
}

// NewPushes returns the push store over db.
func NewPushes(db *gorm.DB) *Pushes { return &Pushes{db: db} }

// Record keeps a push.
func (s *Pushes) Record(ctx context.Context, p Push) error {
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now().UTC()
	}
	if err := s.db.WithContext(ctx).Create(&p).Error; err != nil {
		return fmt.Errorf("record push: %w", err)
	}
	return nil
}

// List returns an agent's recorded pushes, newest first, at most limit (0: 100).
func (s *Pushes) List(ctx context.Context, agentID string, limit int) ([]Push, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	var ps []Push
	if err := s.db.WithContext(ctx).Where("agent_id = ?", agentID).Order("id DESC").Limit(limit).Find(&ps).Error; err != nil {
		return nil, fmt.Errorf("list pushes: %w", err)
	}
	return ps, nil
}
