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

// APIKey is an agent API key as stored: never its value.
type APIKey struct {
	ID        string `gorm:"primaryKey"`
	AgentID   string
	Name      string
	Hash      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// TableName names the table of APIKey.
func (APIKey) TableName() string { return "api_keys" }

// APIKeys stores agent API keys (ak_, package auth). An ak_ key identifies a caller of one
// agent; it never controls deployments. Safe for concurrent use.
type APIKeys struct {
	db *gorm.DB
}

// NewAPIKeys returns the API key store over db.
func NewAPIKeys(db *gorm.DB) *APIKeys { return &APIKeys{db: db} }

// Create makes a key for agentID and returns it with its value, shown once.
func (s *APIKeys) Create(ctx context.Context, agentID, name string) (APIKey, string, error) {
	value := auth.NewSecret(auth.AgentKeyPrefix)
	k := APIKey{ID: auth.NewID("k"), AgentID: agentID, Name: name, Hash: auth.Hash(value), CreatedAt: time.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(&k).Error; err != nil {
		return APIKey{}, "", fmt.Errorf("create api key: %w", err)
	}
	return k, value, nil
}

// Authenticate resolves an ak_ value to its key; anything else is auth.ErrUnauthenticated.
func (s *APIKeys) Authenticate(ctx context.Context, value string) (APIKey, error) {
	if !strings.HasPrefix(value, auth.AgentKeyPrefix) {
		return APIKey{}, auth.ErrUnauthenticated
	}
	var k APIKey
	err := s.db.WithContext(ctx).Where("hash = ?", auth.Hash(value)).Take(&k).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return APIKey{}, auth.ErrUnauthenticated
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("authenticate api key: %w", err)
	}
	if err := (auth.Stored{Hash: k.Hash, Revoked: k.RevokedAt != nil}).Check(value); err != nil {
		return APIKey{}, err
	}
	return k, nil
}
