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

// APIKeys stores agent API keys. An ak_ key identifies a caller of one agent; it never controls deployments.
type APIKeys struct {
	db *gorm.DB
}

// NewAPIKeys returns the API key store over db.
func NewAPIKeys(db *gorm.DB) *APIKeys { return &APIKeys{db: db} }

// Create makes a key for agentID and returns it with its value, shown once.
func (s *APIKeys) Create(ctx context.Context, agentID, name string) (APIKey, string, error) {
	value := newSecret(AgentKeyPrefix)
	k := APIKey{ID: NewID("k"), AgentID: agentID, Name: name, Hash: Hash(value), CreatedAt: time.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(&k).Error; err != nil {
		return APIKey{}, "", fmt.Errorf("create api key: %w", err)
	}
	return k, value, nil
}

// Authenticate resolves an ak_ value to its key; anything else is ErrUnauthenticated.
func (s *APIKeys) Authenticate(ctx context.Context, value string) (APIKey, error) {
	if !strings.HasPrefix(value, AgentKeyPrefix) {
		return APIKey{}, ErrUnauthenticated
	}
	h := Hash(value)
	var k APIKey
	err := s.db.WithContext(ctx).Where("hash = ?", h).Take(&k).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return APIKey{}, ErrUnauthenticated
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("authenticate api key: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(k.Hash), []byte(h)) != 1 || k.RevokedAt != nil {
		return APIKey{}, ErrUnauthenticated
	}
	return k, nil
}
