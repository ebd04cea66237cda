package client

import (
	"encoding/json"
	"time"
)

// Deployment statuses (CONTRACT §3). A deployment serves when its status is StatusReady and it is
// active.
const (
	StatusQueued    = "queued"
	StatusBuilding  = "building"
	StatusReady     = "ready"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Build statuses (CONTRACT §3).
const (
	BuildQueued    = "queued"
	BuildRunning   = "running"
	BuildSucceeded = "succeeded"
	BuildFailed    = "failed"
	BuildCancelled = "cancelled"
)

// Production is the default environment of redeploy, promote and rollback.
const Production = "production"

// Agent is an agent as the platform lists it.
type Agent struct {
	AgentID string          `json:"agentId"`
	Slug    string          `json:"slug"`
	Name    string          `json:"name"`
	URL     string          `json:"url,omitempty"`
	Source  json.RawMessage `json:"source,omitempty"`
}

// DeploySettings are an agent's deploy settings (spec §2.2).
type DeploySettings struct {
	ProductionBranch      string `json:"productionBranch"`
	AutoDeploy            bool   `json:"autoDeploy"`
	AutoPromoteProduction bool   `json:"autoPromoteProduction"`
}

// SourceVersion is a saved hosted source tree.
type SourceVersion struct {
	SourceVersionID string `json:"sourceVersionId"`
	Digest          string `json:"digest"`
}

// RedeployRequest is the body of POST /api/deployments/redeploy. Empty fields take the server's
// defaults (the source's default branch, production, no reuse, the newest source version).
type RedeployRequest struct {
	AgentID         string `json:"agentId"`
	Branch          string `json:"branch,omitempty"`
	Environment     string `json:"environment,omitempty"`
	ReuseBuild      bool   `json:"reuseBuild,omitempty"`
	SourceVersionID string `json:"sourceVersionId,omitempty"`
}

// Redeploy is the answer of a redeploy: the new (or, with Reused, the existing) deployment.
type Redeploy struct {
	DeployID    string `json:"deployId"`
	BuildID     string `json:"buildId"`
	Environment string `json:"environment,omitempty"`
	Reused      bool   `json:"reused,omitempty"`
}

// Deployment is the deployment record of CONTRACT §3. Times are RFC 3339; the optional ones are
// nil until they happen.
type Deployment struct {
	DeployID        string     `json:"deployId"`
	BuildID         string     `json:"buildId"`
	AgentID         string     `json:"agentId"`
	Environment     string     `json:"environment"`
	Commit          string     `json:"commit,omitempty"`
	Branch          string     `json:"branch,omitempty"`
	SourceVersionID string     `json:"sourceVersionId,omitempty"`
	Status          string     `json:"status"`
	IsActive        bool       `json:"isActive"`
	URL             string     `json:"url,omitempty"`
	CreatedAt       time.Time  `json:"createdAt"`
	ReadyAt         *time.Time `json:"readyAt,omitempty"`
	ActivatedAt     *time.Time `json:"activatedAt,omitempty"`
	Error           string     `json:"error,omitempty"`
	// PromotedFrom is the deployment a promotion copied the bundle of; its build has the log.
	PromotedFrom string `json:"promotedFrom,omitempty"`
	// Runtime is running, stopped, unavailable (a runner could not load the bundle:
	// RuntimeError says why) or none (the deployment is not ready).
	Runtime      string `json:"runtime,omitempty"`
	RuntimeError string `json:"runtimeError,omitempty"`
}

// Serving reports whether the deployment is the ready, active one of its environment.
func (d Deployment) Serving() bool { return d.Status == StatusReady && d.IsActive }

// Settled reports whether the deployment's status can no longer change by itself.
func (d Deployment) Settled() bool {
	return d.Status == StatusReady || d.Status == StatusFailed || d.Status == StatusCancelled
}

// BuildStep is one step of a build and how long it took.
type BuildStep struct {
	Name       string `json:"name"`
	Status     string `json:"status"`
	DurationMS int64  `json:"durationMs"`
}

// Build is the build status of CONTRACT §3.
type Build struct {
	BuildID    string      `json:"buildId"`
	Status     string      `json:"status"`
	Commit     string      `json:"commit,omitempty"`
	StartedAt  *time.Time  `json:"startedAt,omitempty"`
	FinishedAt *time.Time  `json:"finishedAt,omitempty"`
	Error      string      `json:"error,omitempty"`
	Steps      []BuildStep `json:"steps,omitempty"`
	// Warnings are what the build found that does not fail it: each env: reference of the
	// agent that is not set, with where it is used and how to set it.
	Warnings []string `json:"warnings,omitempty"`
}

// Finished reports whether the build has ended.
func (b Build) Finished() bool {
	return b.Status == BuildSucceeded || b.Status == BuildFailed || b.Status == BuildCancelled
}

// PromoteRequest is the body of POST /api/deployments/promote. An empty ToEnvironment means
// production.
type PromoteRequest struct {
	AgentID         string `json:"agentId"`
	FromEnvironment string `json:"fromEnvironment"`
	ToEnvironment   string `json:"toEnvironment,omitempty"`
	Force           bool   `json:"force,omitempty"`
}

// RollbackRequest is the body of POST /api/deployments/rollback. An empty DeployID lets the
// platform pick the most recently activated earlier deployment; an empty Environment means
// production.
type RollbackRequest struct {
	AgentID     string `json:"agentId"`
	Environment string `json:"environment,omitempty"`
	DeployID    string `json:"deployId,omitempty"`
}

// TokenRequest is the body of POST /api/agents/{id}/tokens. TTLSeconds 0 takes the platform's
// default (3600); the platform accepts 60 to 86400.
type TokenRequest struct {
	TTLSeconds int    `json:"ttl,omitempty"`
	ScopeID    string `json:"scope_id,omitempty"`
	UserID     string `json:"user_id,omitempty"`
}

// RuntimeToken is a minted runtime token for an agent's chat routes.
type RuntimeToken struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}
