package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"svc/auth"
)

// Token is an automation token as stored: never its value.
type Token struct {
	ID        string `gorm:"primaryKey"`
	Name      string
	Kind      auth.Kind
	AgentID   string // "" for a token not bound to an agent
	Hash      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// TableName names the table of Token.
func (Token) TableName() string { return "tokens" }

// Tokens stores automation tokens (pk_, package auth) in the database. It is safe for concurrent
// use. Its errors are auth's: ErrInvalidKind, ErrNotFound, ErrUnauthenticated.
type Tokens struct {
	db *gorm.DB
}

var _ auth.RevokedLister = (*Tokens)(nil)

// NewTokens returns the token store over db (migrated by package migrations).
func NewTokens(db *gorm.DB) *Tokens { return &Tokens{db: db} }

// Create makes a token and returns it with its value, which is not stored and cannot be read again.
func (s *Tokens) Create(ctx context.Context, name string, kind auth.Kind, agentID string) (Token, string, error) {
	if !kind.Valid() {
		return Token{}, "", fmt.Errorf("%w: %q", auth.ErrInvalidKind, kind)
	}
	value := auth.NewSecret(auth.PlatformPrefix)
	t := Token{ID: auth.NewID("t"), Name: name, Kind: kind, AgentID: agentID, Hash: auth.Hash(value), CreatedAt: time.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(&t).Error; err != nil {
		return Token{}, "", fmt.Errorf("create token: %w", err)
	}
	return t, value, nil
}

// Ensure makes value a valid unbound token of kind, idempotently (the bootstrap admin token).
func (s *Tokens) Ensure(ctx context.Context, name string, kind auth.Kind, value string) error {
	if err := auth.CheckBootstrap(value); err != nil {
		return err
	}
	if !kind.Valid() {
		return fmt.Errorf("%w: %q", auth.ErrInvalidKind, kind)
	}
	h := auth.Hash(value)
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
		t := Token{ID: auth.NewID("t"), Name: name, Kind: kind, Hash: h, CreatedAt: time.Now().UTC()}
		if err := s.db.WithContext(ctx).Create(&t).Error; err != nil && !errors.Is(err, gorm.ErrDuplicatedKey) {
			return fmt.Errorf("ensure token: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("ensure token: %w", err)
	}
}

// Bootstrap makes sure an admin token exists (CONTRACT §3), at every start. A value, when not
// "", is made a valid unbound admin token (Ensure); without one, a first admin token is created
// when no token exists at all, and its value returned, to be shown once. It returns "" when it
// created no token.
func (s *Tokens) Bootstrap(ctx context.Context, value string) (string, error) {
	if value != "" {
		return "", s.Ensure(ctx, "bootstrap", auth.Admin, value)
	}
	var n int64
	if err := s.db.WithContext(ctx).Model(&Token{}).Count(&n).Error; err != nil {
		return "", fmt.Errorf("count tokens: %w", err)
	}
	if n > 0 {
		return "", nil
	}
	_, created, err := s.Create(ctx, "first admin", auth.Admin, "")
	return created, err
}

// Get returns the token with id (its hash, never a value), or auth.ErrNotFound.
func (s *Tokens) Get(ctx context.Context, id string) (Token, error) {
	var t Token
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Token{}, auth.ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("get token: %w", err)
	}
	return t, nil
}

// Revoke stops a token from working at once. A missing token is auth.ErrNotFound.
func (s *Tokens) Revoke(ctx context.Context, id string) error {
	now := time.Now().UTC()
	res := s.db.WithContext(ctx).Model(&Token{}).Where("id = ? AND revoked_at IS NULL", id).Update("revoked_at", now)
	if res.Error != nil {
		return fmt.Errorf("revoke token: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return auth.ErrNotFound
	}
	return nil
}

// RevokedSince implements auth.RevokedLister: the ids of the tokens revoked at or after since.
func (s *Tokens) RevokedSince(ctx context.Context, since time.Time) ([]string, error) {
	var ids []string
	if err := s.db.WithContext(ctx).Model(&Token{}).Where("revoked_at >= ?", since.UTC()).Pluck("id", &ids).Error; err != nil {
		return nil, fmt.Errorf("list revoked tokens: %w", err)
	}
	return ids, nil
}

// Authenticate resolves a pk_ value to its principal. Any other value, or a revoked or unknown
// token, is auth.ErrUnauthenticated.
func (s *Tokens) Authenticate(ctx context.Context, value string) (auth.Principal, error) {
	if !strings.HasPrefix(value, auth.PlatformPrefix) {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	var t Token
	err := s.db.WithContext(ctx).Where("hash = ?", auth.Hash(value)).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	if err != nil {
		return auth.Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	if err := (auth.Stored{Hash: t.Hash, Revoked: t.RevokedAt != nil}).Check(value); err != nil {
		return auth.Principal{}, err
	}
	return auth.Principal{TokenID: t.ID, Name: t.Name, Kind: t.Kind, AgentID: t.AgentID}, nil
}
