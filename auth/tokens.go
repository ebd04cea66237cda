package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Token is an automation token as stored: never its value.
type Token struct {
	ID        string `gorm:"primaryKey"`
	Name      string
	Kind      Kind
	AgentID   string // "" for a token not bound to an agent
	Hash      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// TableName names the table of Token.
func (Token) TableName() string { return "tokens" }

// Principal is who made a platform API call.
type Principal struct {
	TokenID string
	Name    string
	Kind    Kind
	AgentID string // the agent binding; "" for an unbound token
}

// Can reports whether p may make a call that needs kind need on agentID ("" for calls that concern no single agent).
// A bound token may act only on its own agent, and never on calls that concern no agent unless need is Observer.
func (p Principal) Can(need Kind, agentID string) error {
	if !p.Kind.Allows(need) {
		return fmt.Errorf("%w: needs a %s token, this one is %s", ErrForbidden, need, p.Kind)
	}
	if p.AgentID != "" && agentID != p.AgentID {
		return fmt.Errorf("%w: token is bound to another agent", ErrForbidden)
	}
	return nil
}

// Tokens stores automation tokens in the database. It is safe for concurrent use.
type Tokens struct {
	db *gorm.DB
}

// NewTokens returns the token store over db (migrated by package migrations).
func NewTokens(db *gorm.DB) *Tokens { return &Tokens{db: db} }

// Create makes a token and returns it with its value, which is not stored and cannot be read again.
func (s *Tokens) Create(ctx context.Context, name string, kind Kind, agentID string) (Token, string, error) {
	if !kind.Valid() {
		return Token{}, "", fmt.Errorf("%w: %q", ErrInvalidKind, kind)
	}
	value := newSecret(PlatformPrefix)
	t := Token{ID: NewID("t"), Name: name, Kind: kind, AgentID: agentID, Hash: Hash(value), CreatedAt: time.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(&t).Error; err != nil {
		return Token{}, "", fmt.Errorf("create token: %w", err)
	}
	return t, value, nil
}

// Ensure makes value a valid unbound token of kind, idempotently (the bootstrap admin token).
func (s *Tokens) Ensure(ctx context.Context, name string, kind Kind, value string) error {
	if !strings.HasPrefix(value, PlatformPrefix) || len(value) < len(PlatformPrefix)+16 {
		return fmt.Errorf("bootstrap token must start with %q and carry at least 16 more characters", PlatformPrefix)
	}
	if !kind.Valid() {
		return fmt.Errorf("%w: %q", ErrInvalidKind, kind)
	}
	h := Hash(value)
	var existing Token
	err := s.db.WithContext(ctx).Where("hash = ?", h).Take(&existing).Error
	switch {
	case err == nil:
		if existing.RevokedAt != nil || existing.Kind != kind || existing.AgentID != "" {
			return s.db.WithContext(ctx).Model(&Token{}).Where("id = ?", existing.ID).
				Updates(map[string]any{"revoked_at": nil, "kind": kind, "agent_id": ""}).Error
		}
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		t := Token{ID: NewID("t"), Name: name, Kind: kind, Hash: h, CreatedAt: time.Now().UTC()}
		if err := s.db.WithContext(ctx).Create(&t).Error; err != nil && !errors.Is(err, gorm.ErrDuplicatedKey) {
			return fmt.Errorf("ensure token: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("ensure token: %w", err)
	}
}

// Count reports how many tokens exist, revoked ones included.
func (s *Tokens) Count(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&Token{}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	return n, nil
}

// Get returns the token with id (its hash, never a value), or ErrNotFound.
func (s *Tokens) Get(ctx context.Context, id string) (Token, error) {
	var t Token
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Token{}, ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("get token: %w", err)
	}
	return t, nil
}

// Revoke stops a token from working at once. A missing token is ErrNotFound.
func (s *Tokens) Revoke(ctx context.Context, id string) error {
	now := time.Now().UTC()
	res := s.db.WithContext(ctx).Model(&Token{}).Where("id = ? AND revoked_at IS NULL", id).Update("revoked_at", now)
	if res.Error != nil {
		return fmt.Errorf("revoke token: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// RevokedSince returns the ids of the tokens revoked at or after since.
func (s *Tokens) RevokedSince(ctx context.Context, since time.Time) ([]string, error) {
	var ids []string
	if err := s.db.WithContext(ctx).Model(&Token{}).Where("revoked_at >= ?", since.UTC()).Pluck("id", &ids).Error; err != nil {
		return nil, fmt.Errorf("list revoked tokens: %w", err)
	}
	return ids, nil
}

// Authenticate resolves a pk_ value to its principal. Any other value, or a revoked or unknown token, is ErrUnauthenticated.
func (s *Tokens) Authenticate(ctx context.Context, value string) (Principal, error) {
	if !strings.HasPrefix(value, PlatformPrefix) {
		return Principal{}, ErrUnauthenticated
	}
	h := Hash(value)
	var t Token
	err := s.db.WithContext(ctx).Where("hash = ?", h).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(h)) != 1 || t.RevokedAt != nil {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{TokenID: t.ID, Name: t.Name, Kind: t.Kind, AgentID: t.AgentID}, nil
}
