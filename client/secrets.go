package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Secret is what the platform shows of an agent's secret: its name and when it was last set,
// never its value.
type Secret struct {
	Name      string    `json:"name"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SetSecret sets the agent's secret name to value (admin token), replacing any earlier value:
// what an env:NAME reference of the agent resolves to, before the environment. agent is the
// agent's id or slug.
func (c *Client) SetSecret(ctx context.Context, agent, name, value string) error {
	body := map[string]string{"value": value}
	if err := c.do(ctx, http.MethodPut, c.endpoint("/api/agents/%s/secrets/%s", agent, name), body, nil); err != nil {
		return fmt.Errorf("set secret %s of %s: %w", name, agent, err)
	}
	return nil
}

// ListSecrets returns the names of the agent's secrets and when each was set, by name (admin
// token).
func (c *Client) ListSecrets(ctx context.Context, agent string) ([]Secret, error) {
	var out struct {
		Secrets []Secret `json:"secrets"`
	}
	if err := c.do(ctx, http.MethodGet, c.endpoint("/api/agents/%s/secrets", agent), nil, &out); err != nil {
		return nil, fmt.Errorf("list secrets of %s: %w", agent, err)
	}
	return out.Secrets, nil
}

// DeleteSecret removes the agent's secret name (admin token); a name the agent has no secret
// of is a *Error with Code NOT_FOUND.
func (c *Client) DeleteSecret(ctx context.Context, agent, name string) error {
	if err := c.do(ctx, http.MethodDelete, c.endpoint("/api/agents/%s/secrets/%s", agent, name), nil, nil); err != nil {
		return fmt.Errorf("delete secret %s of %s: %w", name, agent, err)
	}
	return nil
}
