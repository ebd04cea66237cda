package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Redeploy starts a build (or, with ReuseBuild, returns a reusable deployment).
func (c *Client) Redeploy(ctx context.Context, req RedeployRequest) (Redeploy, error) {
	var r Redeploy
	if err := c.do(ctx, http.MethodPost, c.endpoint("/api/deployments/redeploy"), req, &r); err != nil {
		return Redeploy{}, fmt.Errorf("redeploy %s: %w", req.AgentID, err)
	}
	return r, nil
}

// Deployment returns a deployment record.
func (c *Client) Deployment(ctx context.Context, deployID string) (Deployment, error) {
	var d Deployment
	if err := c.do(ctx, http.MethodGet, c.endpoint("/api/deployments/%s", deployID), nil, &d); err != nil {
		return Deployment{}, fmt.Errorf("get deployment %s: %w", deployID, err)
	}
	return d, nil
}

// Activate makes a ready deployment the active one of its environment and returns it.
func (c *Client) Activate(ctx context.Context, deployID string) (Deployment, error) {
	var d Deployment
	if err := c.do(ctx, http.MethodPost, c.endpoint("/api/deployments/%s/activate", deployID), nil, &d); err != nil {
		return Deployment{}, fmt.Errorf("activate %s: %w", deployID, err)
	}
	return d, nil
}

// Promote copies the active deployment of FromEnvironment into a new active deployment of
// ToEnvironment and returns it.
func (c *Client) Promote(ctx context.Context, req PromoteRequest) (Deployment, error) {
	var d Deployment
	if err := c.do(ctx, http.MethodPost, c.endpoint("/api/deployments/promote"), req, &d); err != nil {
		return Deployment{}, fmt.Errorf("promote %s from %s: %w", req.AgentID, req.FromEnvironment, err)
	}
	return d, nil
}

// Rollback activates an earlier deployment and returns it.
func (c *Client) Rollback(ctx context.Context, req RollbackRequest) (Deployment, error) {
	var d Deployment
	if err := c.do(ctx, http.MethodPost, c.endpoint("/api/deployments/rollback"), req, &d); err != nil {
		return Deployment{}, fmt.Errorf("roll back %s: %w", req.AgentID, err)
	}
	return d, nil
}

// ListDeployments returns an agent's deployments, newest first, of one environment or (with "")
// of all. A bare array and {"deployments": [...]} are both accepted.
func (c *Client) ListDeployments(ctx context.Context, agentID, environment string) ([]Deployment, error) {
	target := c.endpoint("/api/agents/%s/deployments", agentID)
	if environment != "" {
		target += "?environment=" + url.QueryEscape(environment)
	}
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, target, nil, &raw); err != nil {
		return nil, fmt.Errorf("list deployments of %s: %w", agentID, err)
	}
	return decodeList[Deployment](raw, "deployments")
}

// ActiveDeployment returns the active deployment of an environment ("" means production); none is
// a *Error with Status 404.
func (c *Client) ActiveDeployment(ctx context.Context, agentID, environment string) (Deployment, error) {
	if environment == "" {
		environment = Production
	}
	var d Deployment
	target := c.endpoint("/api/agents/%s/active-deployment", agentID) + "?environment=" + url.QueryEscape(environment)
	if err := c.do(ctx, http.MethodGet, target, nil, &d); err != nil {
		return Deployment{}, fmt.Errorf("get active %s deployment of %s: %w", environment, agentID, err)
	}
	return d, nil
}
