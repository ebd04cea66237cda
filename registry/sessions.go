package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"svc/migrations"
)

// SessionSummary is a chat session as the platform lists it: the record the runtimes keep
// (runner/sessions/dbstore), without its history.
type SessionSummary struct {
	ID        string            `json:"sessionId"`
	AgentID   string            `json:"agentId"`
	Agent     string            `json:"agent"` // the named agent
	ScopeID   string            `json:"scopeId"`
	Owner     string            `json:"owner"`
	DeployID  string            `json:"deployId"`
	Title     string            `json:"title"`
	Status    string            `json:"status"`
	Metadata  map[string]string `json:"metadata"`
	Tokens    int64             `json:"tokens"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
}

// SessionQuery selects an agent's sessions: those whose metadata has each key of Metadata with
// its value (the keys userId and screen of spec 2.6), newest first, at most Limit (1..500; 0
// means 100).
type SessionQuery struct {
	Metadata map[string]string
	Limit    int
}

type sessionSummaryRow struct {
	ID, AgentID, Agent, ScopeID, Owner, DeployID, Title, Status, Metadata string
	TokensUsed                                                            int64
	CreatedAt, UpdatedAt                                                  time.Time
}

// Sessions reads the chat sessions the runtimes keep in the platform database. Safe for
// concurrent use.
type Sessions struct{ db *gorm.DB }

// NewSessions returns the session reader over db.
func NewSessions(db *gorm.DB) *Sessions { return &Sessions{db: db} }

// List returns an agent's sessions that q selects.
func (s *Sessions) List(ctx context.Context, agentID string, q SessionQuery) ([]SessionSummary, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	tx := s.db.WithContext(ctx).Table("sessions").
		Select("id, agent_id, agent, scope_id, owner, deploy_id, title, status, metadata, tokens_used, created_at, updated_at").
		Where("agent_id = ?", agentID)
	for k, v := range q.Metadata {
		tx = migrations.WhereJSONKey(tx, "metadata", k, v)
	}
	var rows []sessionSummaryRow
	if err := tx.Order("updated_at DESC, id").Limit(min(limit, 500)).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]SessionSummary, 0, len(rows))
	for _, r := range rows {
		ss := SessionSummary{ID: r.ID, AgentID: r.AgentID, Agent: r.Agent, ScopeID: r.ScopeID, Owner: r.Owner, DeployID: r.DeployID,
			Title: r.Title, Status: r.Status, Tokens: r.TokensUsed, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
		if err := json.Unmarshal([]byte(r.Metadata), &ss.Metadata); err != nil || ss.Metadata == nil {
			ss.Metadata = map[string]string{}
		}
		out = append(out, ss)
	}
	return out, nil
}
