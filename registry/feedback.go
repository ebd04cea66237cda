package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"svc/auth"

	"gorm.io/gorm"
)

// Feedback is a rating of a chat turn (POST /feedback of the runtime).
type Feedback struct {
	ID        string            `json:"id"`
	AgentID   string            `json:"agentId"`
	SessionID string            `json:"sessionId,omitempty"`
	TraceID   string            `json:"traceId,omitempty"`
	Rating    string            `json:"rating"` // up | down
	Comment   string            `json:"comment,omitempty"`
	Metadata  map[string]string `json:"metadata"`         // the session's metadata when it was given
	UserID    string            `json:"userId,omitempty"` // the verified user of the runtime token
	// OwnerEmail is the e-mail of the user who gave it (UserID), set by the API only while the
	// agent's access settings admit that user (CONTRACT §8); absent otherwise.
	OwnerEmail string    `json:"owner_email,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
}

// FeedbackQuery selects feedback of an agent. UserKey and Screen match the metadata keys userId
// and screen when not empty.
type FeedbackQuery struct {
	UserKey string
	Screen  string
	Limit   int    // 1..500; 0 means 100
	Before  Cursor // the page after this cursor (of this list and agent); the zero Cursor for the first page
}

type feedbackRow struct {
	ID        string `gorm:"primaryKey"`
	AgentID   string
	SessionID string
	TraceID   string
	Rating    string
	Comment   string
	Metadata  string
	UserID    string
	UserKey   string
	Screen    string
	CreatedAt time.Time `gorm:"autoCreateTime:false"`
}

func (feedbackRow) TableName() string { return "feedback" }

// FeedbackStore keeps feedback. Safe for concurrent use.
type FeedbackStore struct{ db *gorm.DB }

// NewFeedback returns the feedback store over db.
func NewFeedback(db *gorm.DB) *FeedbackStore { return &FeedbackStore{db: db} }

// Add keeps f; its ID and CreatedAt are set when empty.
func (s *FeedbackStore) Add(ctx context.Context, f Feedback) (Feedback, error) {
	if f.ID == "" {
		f.ID = auth.NewID("fb_")
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = time.Now().UTC()
	}
	meta, err := json.Marshal(f.Metadata)
	if err != nil {
		return Feedback{}, fmt.Errorf("add feedback: %w", err)
	}
	r := feedbackRow{ID: f.ID, AgentID: f.AgentID, SessionID: f.SessionID, TraceID: f.TraceID, Rating: f.Rating,
		Comment: f.Comment, Metadata: string(meta), UserID: f.UserID, UserKey: f.Metadata["userId"], Screen: f.Metadata["screen"],
		CreatedAt: f.CreatedAt.UTC()}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		return Feedback{}, fmt.Errorf("add feedback: %w", err)
	}
	return f, nil
}

// List is Page without the next cursor: the first page of the agent's feedback that q selects,
// or the page after q.Before.
func (s *FeedbackStore) List(ctx context.Context, agentID string, q FeedbackQuery) ([]Feedback, error) {
	items, _, err := s.Page(ctx, agentID, q)
	return items, err
}

// Page returns a page of an agent's feedback that q selects, newest (by creation, then by id)
// first, and the cursor of the next page: the zero Cursor when this page is the last. A
// q.Before of another list or agent is ErrBadCursor.
func (s *FeedbackStore) Page(ctx context.Context, agentID string, q FeedbackQuery) ([]Feedback, Cursor, error) {
	tx := s.db.WithContext(ctx).Where("agent_id = ?", agentID)
	if q.UserKey != "" {
		tx = tx.Where("user_key = ?", q.UserKey)
	}
	if q.Screen != "" {
		tx = tx.Where("screen = ?", q.Screen)
	}
	tx, err := wherePage(tx, CursorFeedback, agentID, "created_at", q.Before, q.Limit)
	if err != nil {
		return nil, Cursor{}, err
	}
	var rows []feedbackRow
	if err := tx.Find(&rows).Error; err != nil {
		return nil, Cursor{}, fmt.Errorf("list feedback: %w", err)
	}
	out := make([]Feedback, 0, len(rows))
	for _, r := range rows {
		f := Feedback{ID: r.ID, AgentID: r.AgentID, SessionID: r.SessionID, TraceID: r.TraceID, Rating: r.Rating,
			Comment: r.Comment, UserID: r.UserID, CreatedAt: r.CreatedAt.UTC()}
		if err := json.Unmarshal([]byte(r.Metadata), &f.Metadata); err != nil {
			return nil, Cursor{}, fmt.Errorf("list feedback %s: metadata: %w", r.ID, err)
		}
		if f.Metadata == nil {
			f.Metadata = map[string]string{}
		}
		out = append(out, f)
	}
	out, next := nextCursor(out, CursorFeedback, agentID, q.Limit, func(f *Feedback) (time.Time, string) { return f.CreatedAt, f.ID })
	return out, next, nil
}
