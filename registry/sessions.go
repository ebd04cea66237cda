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
	ID      string `json:"sessionId"`
	AgentID string `json:"agentId"`
	Agent   string `json:"agent"` // the named agent
	ScopeID string `json:"scopeId"`
	Owner   string `json:"owner"`
	// OwnerEmail is the owner's e-mail, set by the API only while the agent's access settings
	// admit the owner (CONTRACT §8); absent otherwise.
	OwnerEmail string            `json:"owner_email,omitempty"`
	DeployID   string            `json:"deployId"`
	Title      string            `json:"title"`
	Status     string            `json:"status"`
	Metadata   map[string]string `json:"metadata"`
	Tokens     int64             `json:"tokens"`
	CreatedAt  time.Time         `json:"createdAt"`
	UpdatedAt  time.Time         `json:"updatedAt"`
}

// SessionQuery selects an agent's sessions: those whose metadata has each key of Metadata with
// its value (the keys userId and screen of spec 2.6), newest first, at most Limit (1..500; 0
// means 100), after the cursor Before (of this list and agent; the zero Cursor for the first
// page).
type SessionQuery struct {
	Metadata map[string]string
	Limit    int
	Before   Cursor
}

// SessionRow is a row of the sessions table (migration 00003): a chat session's record, without
// its history, written by the runtimes (runner/sessions/dbstore) and listed here. It is the one
// description of the table's columns. Model, Metadata, Context and State hold JSON.
type SessionRow struct {
	ID               string `gorm:"primaryKey"`
	AgentID          string
	Owner            string
	ScopeID          string
	Agent            string
	Skill            string
	DeployID         string
	Model            string
	MaxSessionTokens int64
	TokensUsed       int64
	InputTokens      int64
	OutputTokens     int64
	CachedTokens     int64
	StoredBytes      int64
	Title            string
	Status           string
	Metadata         string
	Context          string
	State            string
	CreatedAt        time.Time `gorm:"autoCreateTime:false"`
	UpdatedAt        time.Time `gorm:"autoUpdateTime:false"`
}

// TableName names the table of SessionRow.
func (SessionRow) TableName() string { return "sessions" }

// Sessions reads the chat sessions the runtimes keep in the platform database. Safe for
// concurrent use.
type Sessions struct{ db *gorm.DB }

// NewSessions returns the session reader over db.
func NewSessions(db *gorm.DB) *Sessions { return &Sessions{db: db} }

// List is Page without the next cursor: the first page of the agent's sessions that q selects,
// or the page after q.Before.
func (s *Sessions) List(ctx context.Context, agentID string, q SessionQuery) ([]SessionSummary, error) {
	items, _, err := s.Page(ctx, agentID, q)
	return items, err
}

// Page returns a page of an agent's sessions that q selects, newest (by last update, then by
// id) first, and the cursor of the next page: the zero Cursor when this page is the last. A
// q.Before of another list or agent is ErrBadCursor. A session updated while a client pages
// moves ahead of its cursor: it is not in later pages (and never twice), but on a new first page.
func (s *Sessions) Page(ctx context.Context, agentID string, q SessionQuery) ([]SessionSummary, Cursor, error) {
	// The columns of a summary: not the session's model, context and state.
	tx := s.db.WithContext(ctx).Model(&SessionRow{}).
		Select("id, agent_id, agent, scope_id, owner, deploy_id, title, status, metadata, tokens_used, created_at, updated_at").
		Where("agent_id = ?", agentID)
	for k, v := range q.Metadata {
		tx = migrations.WhereJSONKey(tx, "metadata", k, v)
	}
	tx, err := wherePage(tx, CursorSessions, agentID, "updated_at", q.Before, q.Limit)
	if err != nil {
		return nil, Cursor{}, err
	}
	var rows []SessionRow
	if err := tx.Find(&rows).Error; err != nil {
		return nil, Cursor{}, fmt.Errorf("list sessions: %w", err)
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
	out, next := nextCursor(out, CursorSessions, agentID, q.Limit, func(s *SessionSummary) (time.Time, string) { return s.UpdatedAt, s.ID })
	return out, next, nil
}
