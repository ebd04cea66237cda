package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// EvalRun is a run of a deployment's evals (GET /api/deployments/{deployId}/evals).
type EvalRun struct {
	EvalRunID  string     `json:"evalRunId"`
	DeployID   string     `json:"deployId"`
	Commit     string     `json:"commit"`
	State      string     `json:"state"` // queued | running | success | failure | error
	Error      string     `json:"error"`
	Result     EvalResult `json:"result"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

// Finished reports whether the run has its final state.
func (r EvalRun) Finished() bool { return r.State != "queued" && r.State != "running" }

// EvalResult is what the runner found.
type EvalResult struct {
	State string        `json:"State"`
	Evals []EvalOutcome `json:"Evals"`
}

// EvalOutcome is one eval's outcome.
type EvalOutcome struct {
	Name       string `json:"Name"`
	Title      string `json:"Title"`
	Status     string `json:"Status"`
	Tokens     int    `json:"Tokens"`
	Assertions []struct {
		Text   string `json:"Text"`
		By     string `json:"By"`
		Status string `json:"Status"`
		Reason string `json:"Reason"`
	} `json:"Assertions"`
	Runs []struct {
		SessionID string `json:"SessionID"`
	} `json:"Runs"`
}

// RunEvals queues a run of a ready deployment's evals.
func (c *Client) RunEvals(ctx context.Context, deployID string) (EvalRun, error) {
	var r EvalRun
	if err := c.do(ctx, http.MethodPost, c.endpoint("/api/deployments/%s/evals", deployID), nil, &r); err != nil {
		return EvalRun{}, fmt.Errorf("run evals of %s: %w", deployID, err)
	}
	return r, nil
}

// LatestEvals returns the latest run of a deployment's evals.
func (c *Client) LatestEvals(ctx context.Context, deployID string) (EvalRun, error) {
	var r EvalRun
	if err := c.do(ctx, http.MethodGet, c.endpoint("/api/deployments/%s/evals", deployID), nil, &r); err != nil {
		return EvalRun{}, fmt.Errorf("evals of %s: %w", deployID, err)
	}
	return r, nil
}
