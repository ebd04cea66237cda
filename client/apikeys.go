package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// APIKey is an agent API key as the platform lists it: never its value.
type APIKey struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
}

// NewAPIKey is a key just created, with its ak_ value: the only time the platform shows it.
type NewAPIKey struct {
	ID   string `json:"id"`
	Key  string `json:"key"`
	Name string `json:"name"`
}

// CreateAPIKey creates an ak_ key of the agent (admin token).
func (c *Client) CreateAPIKey(ctx context.Context, agent, name string) (NewAPIKey, error) {
	var k NewAPIKey
	if err := c.do(ctx, http.MethodPost, c.endpoint("/api/agents/%s/api-keys", agent), map[string]string{"name": name}, &k); err != nil {
		return NewAPIKey{}, fmt.Errorf("create api key of %s: %w", agent, err)
	}
	return k, nil
}

// ListAPIKeys lists the agent's keys that are not revoked (admin token).
func (c *Client) ListAPIKeys(ctx context.Context, agent string) ([]APIKey, error) {
	var out struct {
		APIKeys []APIKey `json:"apiKeys"`
	}
	if err := c.do(ctx, http.MethodGet, c.endpoint("/api/agents/%s/api-keys", agent), nil, &out); err != nil {
		return nil, fmt.Errorf("list api keys of %s: %w", agent, err)
	}
	return out.APIKeys, nil
}

// RevokeAPIKey revokes the agent's key id (admin token); every runner refuses it within 5
// seconds. An unknown or already revoked key is a *Error with Code NOT_FOUND.
func (c *Client) RevokeAPIKey(ctx context.Context, agent, id string) error {
	if err := c.do(ctx, http.MethodDelete, c.endpoint("/api/agents/%s/api-keys/%s", agent, id), nil, nil); err != nil {
		return fmt.Errorf("revoke api key %s of %s: %w", id, agent, err)
	}
	return nil
}
