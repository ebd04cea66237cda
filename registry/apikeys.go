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
	// LastUsedAt is when a runtime last accepted the key (written in batches, at most a minute
	// late); nil when never.
	LastUsedAt *time.Time
}

// TableName names the table of APIKey.
func (APIKey) TableName() string { return "api_keys" }

// APIKeys stores agent API keys (ak_, package auth). An ak_ key identifies a caller of one
// agent; it never controls deployments. Safe for concurrent use.
type APIKeys struct {
	db *gorm.DB
}

var _ auth.KeyStore = (*APIKeys)(nil)

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

// List returns the keys of agentID that are not revoked, oldest first.
func (s *APIKeys) List(ctx context.Context, agentID string) ([]APIKey, error) {
	var keys []APIKey
	err := s.db.WithContext(ctx).Where("agent_id = ? AND revoked_at IS NULL", agentID).Order("created_at, id").Find(&keys).Error
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// Get returns the key id of agentID, revoked or not (RevokedAt), or auth.ErrNotFound: an
// automation's saver is checked with it at each fire.
func (s *APIKeys) Get(ctx context.Context, agentID, id string) (APIKey, error) {
	var keys []APIKey
	if err := s.db.WithContext(ctx).Where("id = ? AND agent_id = ?", id, agentID).Limit(1).Find(&keys).Error; err != nil {
		return APIKey{}, fmt.Errorf("get api key: %w", err)
	}
	if len(keys) == 0 {
		return APIKey{}, auth.ErrNotFound
	}
	return keys[0], nil
}

// Revoke revokes the key id of agentID at once; a key that is unknown, another agent's or
// already revoked is auth.ErrNotFound.
func (s *APIKeys) Revoke(ctx context.Context, agentID, id string) error {
	res := s.db.WithContext(ctx).Model(&APIKey{}).Where("id = ? AND agent_id = ? AND revoked_at IS NULL", id, agentID).
		Update("revoked_at", time.Now().UTC())
	if res.Error != nil {
		return fmt.Errorf("revoke api key: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return auth.ErrNotFound
	}
	return nil
}

// KeyByHash implements auth.KeyStore: the key whose value hashes to hash, or auth.ErrKeyNotFound.
func (s *APIKeys) KeyByHash(ctx context.Context, hash string) (auth.StoredKey, error) {
	var k APIKey
	err := s.db.WithContext(ctx).Where("hash = ?", hash).Take(&k).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return auth.StoredKey{}, auth.ErrKeyNotFound
	case err != nil:
		return auth.StoredKey{}, fmt.Errorf("get api key: %w", err)
	}
	return auth.StoredKey{AgentKey: auth.AgentKey{ID: k.ID, AgentID: k.AgentID}, Revoked: k.RevokedAt != nil}, nil
}

// RevokedKeysSince implements auth.KeyStore: the ids of the keys revoked at or after since.
func (s *APIKeys) RevokedKeysSince(ctx context.Context, since time.Time) ([]string, error) {
	var ids []string
	if err := s.db.WithContext(ctx).Model(&APIKey{}).Where("revoked_at >= ?", since.UTC()).Pluck("id", &ids).Error; err != nil {
		return nil, fmt.Errorf("list revoked api keys: %w", err)
	}
	return ids, nil
}

// MarkKeysUsed implements auth.KeyStore: it sets last_used_at of each key, never moving it back.
func (s *APIKeys) MarkKeysUsed(ctx context.Context, used map[string]time.Time) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for id, at := range used {
			at = at.UTC()
			err := tx.Model(&APIKey{}).Where("id = ? AND (last_used_at IS NULL OR last_used_at < ?)", id, at).
				Update("last_used_at", at).Error
			if err != nil {
				return fmt.Errorf("mark api key %s used: %w", id, err)
			}
		}
		return nil
	})
}
