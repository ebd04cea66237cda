package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrNoAccessSettings means an agent has no access settings: nobody can sign in on its host.
var ErrNoAccessSettings = errors.New("registry: no access settings")

// ErrBrowserSessionNotFound means no browser session has that id.
var ErrBrowserSessionNotFound = errors.New("registry: browser session not found")

// accessRow is an agent's access settings as stored: the JSON the API took, validated there.
type accessRow struct {
	AgentID   string `gorm:"primaryKey"`
	Settings  string
	UpdatedAt time.Time
}

// TableName names the table of accessRow.
func (accessRow) TableName() string { return "agent_access" }

// Access stores each agent's access settings (CONTRACT §8: the OpenID provider its users sign in
// with, the allow rules, the collaborators) as the JSON document of GET|PUT
// /api/agents/{id}/access; the runtime decodes and validates it. Safe for concurrent use.
type Access struct {
	db *gorm.DB
}

// NewAccess returns the access settings store over db.
func NewAccess(db *gorm.DB) *Access { return &Access{db: db} }

// Get returns the settings document of agentID and when it was last set, or ErrNoAccessSettings.
func (s *Access) Get(ctx context.Context, agentID string) (json.RawMessage, time.Time, error) {
	var row accessRow
	err := s.db.WithContext(ctx).Where("agent_id = ?", agentID).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, time.Time{}, ErrNoAccessSettings
	case err != nil:
		return nil, time.Time{}, fmt.Errorf("get access settings: %w", err)
	}
	return json.RawMessage(row.Settings), row.UpdatedAt, nil
}

// Put replaces the settings document of agentID.
func (s *Access) Put(ctx context.Context, agentID string, settings json.RawMessage) error {
	row := accessRow{AgentID: agentID, Settings: string(settings), UpdatedAt: time.Now().UTC()}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "agent_id"}}, DoUpdates: clause.AssignmentColumns([]string{"settings", "updated_at"}),
	}).Create(&row).Error
	if err != nil {
		return fmt.Errorf("put access settings: %w", err)
	}
	return nil
}

// BrowserSession is a signed-in user's session on an agent's host, as stored: the cookie's value
// never is, only its hash (IDHash).
type BrowserSession struct {
	IDHash  string `gorm:"primaryKey"`
	AgentID string
	UserID  string
	Email   string
	// EmailVerified is false when the provider said the e-mail is not verified.
	EmailVerified bool
	OrgID         string
	Groups        []string `gorm:"-"`
	// ScopeID is the ID token's scope_id claim; "" when none.
	ScopeID   string
	CreatedAt time.Time
	ExpiresAt time.Time
	EndedAt   *time.Time
}

// browserSessionRow is a BrowserSession with its groups as the stored JSON array.
type browserSessionRow struct {
	BrowserSession `gorm:"embedded"`
	GroupNames     string
}

// TableName names the table of browserSessionRow.
func (browserSessionRow) TableName() string { return "browser_sessions" }

// BrowserSessions stores browser sessions where every runner sees them. Safe for concurrent use.
type BrowserSessions struct {
	db *gorm.DB
}

// NewBrowserSessions returns the browser session store over db.
func NewBrowserSessions(db *gorm.DB) *BrowserSessions { return &BrowserSessions{db: db} }

// Create stores s.
func (s *BrowserSessions) Create(ctx context.Context, bs BrowserSession) error {
	groups, err := json.Marshal(bs.Groups)
	if err != nil || bs.Groups == nil {
		groups = []byte("[]")
	}
	bs.CreatedAt, bs.ExpiresAt = bs.CreatedAt.UTC(), bs.ExpiresAt.UTC()
	if err := s.db.WithContext(ctx).Create(&browserSessionRow{BrowserSession: bs, GroupNames: string(groups)}).Error; err != nil {
		return fmt.Errorf("create browser session: %w", err)
	}
	return nil
}

// Get returns the session whose id hashes to idHash, ended or expired ones included (the caller
// decides), or ErrBrowserSessionNotFound.
func (s *BrowserSessions) Get(ctx context.Context, idHash string) (BrowserSession, error) {
	var row browserSessionRow
	err := s.db.WithContext(ctx).Where("id_hash = ?", idHash).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return BrowserSession{}, ErrBrowserSessionNotFound
	case err != nil:
		return BrowserSession{}, fmt.Errorf("get browser session: %w", err)
	}
	if err := json.Unmarshal([]byte(row.GroupNames), &row.Groups); err != nil {
		return BrowserSession{}, fmt.Errorf("get browser session: its groups: %w", err)
	}
	return row.BrowserSession, nil
}

// Latest returns, for each of userIDs that has one, that user's most recently created browser
// session on agentID, ended and expired ones included: what the platform last learned of the
// user from the agent's identity provider (its e-mail, email_verified, org and groups). One
// query for all of userIDs; a user with no browser session (one known only from a runtime
// token) is not in the map.
func (s *BrowserSessions) Latest(ctx context.Context, agentID string, userIDs []string) (map[string]BrowserSession, error) {
	out := map[string]BrowserSession{}
	if len(userIDs) == 0 {
		return out, nil
	}
	var rows []browserSessionRow
	err := s.db.WithContext(ctx).Where("agent_id = ? AND user_id IN ?", agentID, userIDs).
		Order("created_at DESC").Order("id_hash").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("latest browser sessions: %w", err)
	}
	for _, row := range rows {
		if _, ok := out[row.UserID]; ok {
			continue
		}
		if err := json.Unmarshal([]byte(row.GroupNames), &row.Groups); err != nil {
			return nil, fmt.Errorf("latest browser sessions: the groups of a session of %s: %w", row.UserID, err)
		}
		out[row.UserID] = row.BrowserSession
	}
	return out, nil
}

// End ends the session whose id hashes to idHash at now; ending an ended session keeps its
// first end and is no error; an unknown one is ErrBrowserSessionNotFound.
func (s *BrowserSessions) End(ctx context.Context, idHash string, now time.Time) error {
	res := s.db.WithContext(ctx).Model(&browserSessionRow{}).Where("id_hash = ? AND ended_at IS NULL", idHash).
		Update("ended_at", now.UTC())
	if res.Error != nil {
		return fmt.Errorf("end browser session: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		var n int64
		if err := s.db.WithContext(ctx).Model(&browserSessionRow{}).Where("id_hash = ?", idHash).Count(&n).Error; err != nil {
			return fmt.Errorf("end browser session: %w", err)
		}
		if n == 0 {
			return ErrBrowserSessionNotFound
		}
	}
	return nil
}

// EndedSince returns the id hashes of the sessions ended at or after since, for the runners'
// caches to drop them.
func (s *BrowserSessions) EndedSince(ctx context.Context, since time.Time) ([]string, error) {
	var hashes []string
	err := s.db.WithContext(ctx).Model(&browserSessionRow{}).Where("ended_at IS NOT NULL AND ended_at >= ?", since.UTC()).
		Pluck("id_hash", &hashes).Error
	if err != nil {
		return nil, fmt.Errorf("browser sessions ended since %s: %w", since.Format(time.RFC3339), err)
	}
	return hashes, nil
}

// DeleteExpired removes the sessions that expired or ended before before, and says how many.
func (s *BrowserSessions) DeleteExpired(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at < ? OR ended_at < ?", before.UTC(), before.UTC()).Delete(&browserSessionRow{})
	if res.Error != nil {
		return 0, fmt.Errorf("delete expired browser sessions: %w", res.Error)
	}
	return res.RowsAffected, nil
}
