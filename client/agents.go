package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// ListAgents returns every agent the token may read. The platform may answer a bare array or
// {"agents": [...]}; both are accepted.
func (c *Client) ListAgents(ctx context.Context) ([]Agent, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, c.endpoint("/api/agents"), nil, &raw); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return decodeList[Agent](raw, "agents")
}

// GetAgent returns one agent by its id or its slug (the platform takes either).
func (c *Client) GetAgent(ctx context.Context, idOrSlug string) (Agent, error) {
	var a Agent
	if err := c.do(ctx, http.MethodGet, c.endpoint("/api/agents/%s", idOrSlug), nil, &a); err != nil {
		return Agent{}, fmt.Errorf("get agent %s: %w", idOrSlug, err)
	}
	return a, nil
}

// ResolveAgent finds an agent by id or slug: the platform's GET /api/agents/{id} takes either.
// An agent found by neither is a *Error with Code NOT_FOUND that names idOrSlug.
func (c *Client) ResolveAgent(ctx context.Context, idOrSlug string) (Agent, error) {
	if idOrSlug == "" {
		return Agent{}, errors.New("resolve agent: no agent given (an id or slug)")
	}
	a, err := c.GetAgent(ctx, idOrSlug)
	if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusNotFound {
		return Agent{}, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf("no agent has the id or slug %q", idOrSlug)}
	}
	return a, err
}

// DeploySettings returns an agent's deploy settings.
func (c *Client) DeploySettings(ctx context.Context, agentID string) (DeploySettings, error) {
	var s DeploySettings
	if err := c.do(ctx, http.MethodGet, c.endpoint("/api/agents/%s/deploy-settings", agentID), nil, &s); err != nil {
		return DeploySettings{}, fmt.Errorf("get deploy settings of %s: %w", agentID, err)
	}
	return s, nil
}

// MintRuntimeToken mints a runtime token for the agent's chat routes.
func (c *Client) MintRuntimeToken(ctx context.Context, agentID string, req TokenRequest) (RuntimeToken, error) {
	var t RuntimeToken
	if err := c.do(ctx, http.MethodPost, c.endpoint("/api/agents/%s/tokens", agentID), req, &t); err != nil {
		return RuntimeToken{}, fmt.Errorf("mint runtime token for %s: %w", agentID, err)
	}
	if t.Token == "" {
		return RuntimeToken{}, fmt.Errorf("mint runtime token for %s: the answer has no token", agentID)
	}
	return t, nil
}

// CreateAgent creates an agent (admin token); slug "" derives one from the name.
func (c *Client) CreateAgent(ctx context.Context, name, slug string) (Agent, error) {
	body := map[string]string{"name": name}
	if slug != "" {
		body["slug"] = slug
	}
	var a Agent
	err := c.do(ctx, http.MethodPost, c.endpoint("/api/agents"), body, &a)
	return a, err
}

// SourceRequest connects an agent's source: Type "git" (URL, DefaultBranch, WebhookSecret,
// Credentials "env:VAR") or "hosted".
type SourceRequest struct {
	Type          string `json:"type"`
	URL           string `json:"url,omitempty"`
	DefaultBranch string `json:"defaultBranch,omitempty"`
	WebhookSecret string `json:"webhookSecret,omitempty"`
	Credentials   string `json:"credentials,omitempty"`
}

// PutSource connects an agent's source (admin token).
func (c *Client) PutSource(ctx context.Context, agentID string, req SourceRequest) error {
	return c.do(ctx, http.MethodPut, c.endpoint("/api/agents/%s/source", agentID), req, nil)
}

// SettingsPatch changes some deploy settings; nil fields stay as they are.
type SettingsPatch struct {
	ProductionBranch      *string `json:"productionBranch,omitempty"`
	AutoDeploy            *bool   `json:"autoDeploy,omitempty"`
	AutoPromoteProduction *bool   `json:"autoPromoteProduction,omitempty"`
}

// PutSettings changes an agent's deploy settings (operator token) and returns them.
func (c *Client) PutSettings(ctx context.Context, agentID string, patch SettingsPatch) (DeploySettings, error) {
	var s DeploySettings
	err := c.do(ctx, http.MethodPut, c.endpoint("/api/agents/%s/deploy-settings", agentID), patch, &s)
	return s, err
}
