package main

import (
	"context"
	"errors"
	"fmt"

	"svc/auth"
	"svc/registry"
	"svc/runner"
	"svc/runner/access"
	"svc/runner/runtime"
	"svc/workers"
)

// turnQueue is the asynq queue of the turns the platform runs itself, beside the builds' "svc".
const turnQueue = "svc-turns"

// turnTasks are the task types of the turns lane: under svc up, the jobs the turn lane of the
// database queue claims, and the others leave.
var turnTasks = []string{workers.TaskAutomationFire, workers.TaskChannelTurns, workers.TaskChannelTurn, workers.TaskChannelSend}

// automationHost is what the runtimes of this process need for /api/automations: the store and
// the platform queue their fires run through.
func (p *platform) automationHost() *runtime.Automations {
	return &runtime.Automations{Store: p.stores.Automations, Fire: func(ctx context.Context, f runtime.AutomationFire) error {
		return workers.EnqueueAutomationFire(ctx, p.turns, workers.AutomationFireTask{AutomationID: f.AutomationID, FireTime: f.FireTime, Trigger: f.Trigger})
	}}
}

// automationRunner is a runtime that runs automations' fires (runtime.Runtime).
type automationRunner interface {
	RunAutomation(ctx context.Context, run runtime.AutomationRun) (runtime.AutomationResult, error)
}

// runAutomation runs a fire on the active deployment of its environment, through router (so
// that a durable tool it starts is run by this process's engine like any other), as its saver:
// a saver whose credential no longer holds disables the automation instead.
func (p *platform) runAutomation(router *runner.Router) func(ctx context.Context, r workers.AutomationRun) (workers.AutomationResult, error) {
	return func(ctx context.Context, r workers.AutomationRun) (workers.AutomationResult, error) {
		a := r.Automation
		if reason, err := p.saverRevoked(ctx, a); err != nil {
			return workers.AutomationResult{}, err
		} else if reason != "" {
			return workers.AutomationResult{}, &workers.SaverRevokedError{Reason: reason}
		}
		d, err := p.deploys.Active(ctx, a.AgentID, r.Spec.Environment)
		if errors.Is(err, registry.ErrNoActive) {
			return workers.AutomationResult{}, fmt.Errorf("%w: environment %q of the agent has no active deployment", workers.ErrSkipRetry, r.Spec.Environment)
		}
		if err != nil {
			return workers.AutomationResult{}, err
		}
		rt, err := router.Deployment(ctx, d.ID)
		if err != nil {
			return workers.AutomationResult{}, fmt.Errorf("load deployment %s: %w", d.ID, err)
		}
		ar, ok := rt.(automationRunner)
		if !ok {
			return workers.AutomationResult{}, fmt.Errorf("%w: deployment %s cannot run automations", workers.ErrSkipRetry, d.ID)
		}
		res, err := ar.RunAutomation(ctx, runtime.AutomationRun{AutomationID: a.ID, Name: a.Name, Spec: r.Spec, Saver: a.Saver,
			Trigger: r.Trigger, Event: r.Event, Started: r.Started})
		if err != nil {
			return workers.AutomationResult{}, err
		}
		return workers.AutomationResult{SessionID: res.SessionID, DoneReason: res.DoneReason, Error: res.Error}, nil
	}
}

// saverRevoked says why the saver of a may no longer run it ("" while it may): its ak_ key or the
// pk_ token that minted its runtime token was revoked, or the agent's access settings no longer
// admit its signed-in user (CONTRACT §9).
func (p *platform) saverRevoked(ctx context.Context, a registry.Automation) (string, error) {
	s := a.Saver
	switch access.Method(s.CredentialKind) {
	case access.MethodAPIKey:
		k, err := p.stores.APIKeys.Get(ctx, a.AgentID, s.CredentialID)
		switch {
		case errors.Is(err, auth.ErrNotFound):
			return "the API key " + s.CredentialID + " that saved it no longer exists", nil
		case err != nil:
			return "", err
		case k.RevokedAt != nil:
			return "the API key " + k.ID + " that saved it was revoked", nil
		}
	case access.MethodRuntimeToken:
		if s.CredentialID == "" {
			return "", nil // minted before tokens named their minter
		}
		t, err := p.stores.Tokens.Get(ctx, s.CredentialID)
		switch {
		case errors.Is(err, auth.ErrNotFound):
			return "the platform token " + s.CredentialID + " that minted its saver's runtime token no longer exists", nil
		case err != nil:
			return "", err
		case t.RevokedAt != nil:
			return "the platform token " + t.ID + " that minted its saver's runtime token was revoked", nil
		}
	case access.MethodBrowserSession, access.MethodOIDCToken:
		raw, _, err := p.stores.Access.Get(ctx, a.AgentID)
		if errors.Is(err, registry.ErrNoAccessSettings) {
			return "the agent no longer has sign-in settings, so its saver " + s.UserID + " cannot use it", nil
		}
		if err != nil {
			return "", err
		}
		settings, err := access.ParseSettings(raw)
		if err != nil {
			return "", fmt.Errorf("the agent's access settings: %w", err)
		}
		if !settings.Admits(access.User{ID: s.UserID, Email: s.Email, EmailVerified: s.EmailVerified, OrgID: s.OrgID, Groups: s.Groups}) {
			return "the agent's allow rules no longer admit its saver " + s.UserID, nil
		}
	}
	return "", nil
}
