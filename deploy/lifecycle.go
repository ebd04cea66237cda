package deploy

import (
	"context"
	"errors"
	"fmt"

	"svc/agent"
	"svc/builder"
	"svc/bundle"
	"svc/faults"
	"svc/registry"
)

// ErrNothingToPromote is wrapped by a promotion whose source environment has no active
// deployment; the message names the environment.
var ErrNothingToPromote = errors.New("deploy: nothing to promote")

// BundleError means that the bundle of a deployment is missing or does not open as a runner
// opens it, so nothing was changed. Err is the cause, for the log.
type BundleError struct {
	DeployID string
	Err      error
}

// Error names the deployment and the cause.
func (e *BundleError) Error() string {
	return fmt.Sprintf("deploy: the bundle of deployment %s is missing or does not open: %v", e.DeployID, e.Err)
}

// Unwrap returns the cause.
func (e *BundleError) Unwrap() error { return e.Err }

// NotBuiltError means that a deployment has no bundle yet (its build is not done, or failed).
type NotBuiltError struct {
	DeployID string
	Status   string
}

// Error names the deployment and its status.
func (e *NotBuiltError) Error() string {
	return fmt.Sprintf("deploy: deployment %s has no bundle (status %s)", e.DeployID, e.Status)
}

// LifecycleConfig is what a Lifecycle works with. Every field is required.
type LifecycleConfig struct {
	// Deployments is the state machine: each change of an environment is one transaction there.
	Deployments *registry.Deployments
	// Sources tells whether an agent's source is git, whose promotions the evals gate.
	Sources *registry.Sources
	// Gate decides whether a commit's svc/evals status blocks its promotion.
	Gate registry.PromotionGate
	// Objects holds the bundles, opened before a deployment becomes active.
	Objects registry.Objects
}

// Lifecycle changes what an environment serves: activate, promote and roll back (spec 4.1). Each
// first opens the bundle it is about to make active as a runner would, so that an environment
// never switches to a deployment that cannot serve; then the registry makes the change in one
// transaction under the environment's lock. It is safe for concurrent use.
type Lifecycle struct {
	cfg LifecycleConfig
}

// NewLifecycle returns a Lifecycle over cfg.
func NewLifecycle(cfg LifecycleConfig) *Lifecycle {
	return &Lifecycle{cfg: cfg}
}

// Open opens the bundle of d and loads its agent, as a runner does (builder.OpenStored). A
// deployment without a bundle is a *NotBuiltError; one whose bundle is missing or does not open
// a *BundleError.
func (l *Lifecycle) Open(ctx context.Context, d registry.Deployment) (*bundle.Bundle, *agent.Agent, error) {
	if d.BundleKey == "" {
		return nil, nil, &NotBuiltError{DeployID: d.ID, Status: d.Status}
	}
	b, ag, err := builder.OpenStored(ctx, l.cfg.Objects, d.BundleKey)
	if err != nil {
		return nil, nil, &BundleError{DeployID: d.ID, Err: err}
	}
	return b, ag, nil
}

// servable checks, before a ready deployment is made active, that a runner can open its bundle.
// A deployment that is not ready is left to the registry (registry.ErrBuildNotReady).
func (l *Lifecycle) servable(ctx context.Context, d registry.Deployment) error {
	if d.Status != registry.StatusReady {
		return nil
	}
	_, _, err := l.Open(ctx, d)
	return err
}

// Activate makes d, a ready deployment whose bundle opens, the active one of its environment.
func (l *Lifecycle) Activate(ctx context.Context, d registry.Deployment, actor string) (registry.Deployment, error) {
	if err := l.servable(ctx, d); err != nil {
		return registry.Deployment{}, err
	}
	return l.cfg.Deployments.Activate(ctx, d.ID, actor)
}

// PromoteRequest copies the active deployment of From into a new, active deployment of To.
type PromoteRequest struct {
	AgentID string
	From    string
	To      string // default production
	// Force promotes whatever the commit's svc/evals status says.
	Force bool
	Actor string
}

// Promote creates a new deployment in req.To from the active one of req.From and activates it.
// For a git source the commit's svc/evals status must not block (registry.ErrEvalGateBlocked)
// unless req.Force; the bundle must open (*BundleError, wrapped in
// registry.ErrBundleUnavailable). With no active deployment in req.From it is
// ErrNothingToPromote. On any failure the destination is unchanged.
func (l *Lifecycle) Promote(ctx context.Context, req PromoteRequest) (registry.Deployment, error) {
	src, err := l.cfg.Sources.Get(ctx, req.AgentID)
	if err != nil && !errors.Is(err, registry.ErrSourceNotFound) {
		return registry.Deployment{}, err
	}
	preq := registry.PromoteRequest{
		AgentID: req.AgentID, From: req.From, To: req.To, Force: req.Force, Actor: req.Actor,
		Copy: func(ctx context.Context, d registry.Deployment) (string, error) {
			// Bundles are immutable and content addressed: the new deployment shares the object.
			// Opening it as a runner does proves it is present and serves (no copy is made).
			faults.Point("promote.copy")
			if err := l.servable(ctx, d); err != nil {
				return "", err
			}
			return d.BundleKey, nil
		},
	}
	if src.Type == registry.SourceGit {
		preq.Gate = l.cfg.Gate
	}
	d, err := l.cfg.Deployments.Promote(ctx, preq)
	if errors.Is(err, registry.ErrNoActive) {
		return registry.Deployment{}, fmt.Errorf("%w: environment %s has no active deployment to promote", ErrNothingToPromote, req.From)
	}
	return d, err
}

// Rollback activates deployID in env (default production) or, when deployID is "", the
// deployment that was live there before (registry.Deployments.Rollback). The target's bundle must
// open before anything changes: it is picked, checked, then switched to.
func (l *Lifecycle) Rollback(ctx context.Context, agentID, env, deployID, actor string) (registry.Deployment, error) {
	target, err := l.cfg.Deployments.RollbackTarget(ctx, agentID, env, deployID)
	if err != nil {
		return registry.Deployment{}, err
	}
	if err := l.servable(ctx, target); err != nil {
		return registry.Deployment{}, err
	}
	return l.cfg.Deployments.Rollback(ctx, agentID, env, target.ID, actor)
}
