package main

import (
	"context"
	"encoding/json"

	"svc/agent"
	"svc/builder"
	"svc/deploy"
	"svc/evals"
	"svc/registry"
	"svc/runner/runtime"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/memstore"
	"svc/runner/stores"
)

// newEvals is the eval policy of deployments (deploy.Evals): the API queues runs with it, the
// build handler queues them after a build, and the eval handler posts statuses with it.
func (p *platform) newEvals() *deploy.Evals {
	return deploy.NewEvals(deploy.EvalsConfig{
		Deployments: p.deploys, Runs: p.stores.EvalRuns, Statuses: p.stores.CommitStatuses, Sources: p.stores.Sources,
		Secrets: p.stores.Secrets, Objects: p.objects, Queue: p.queue, PublicURL: p.cfg.PublicURL, Logger: p.log,
	})
}

// loadAgent opens a deployment's bundle and loads its agent, as a runner does: the runners'
// LoadBundle.
func (p *platform) loadAgent(ctx context.Context, d registry.Deployment) (*agent.Agent, error) {
	_, ag, err := builder.OpenStored(ctx, p.objects, d.BundleKey)
	return ag, err
}

// runEvals runs the evals of deployment d (evals.RunAgent) on a runtime of its bundle in this
// process: each eval a fresh session in the platform's session store (readable through the
// deployment's history routes), metadata source=eval.
func (p *platform) runEvals(ctx context.Context, d registry.Deployment) (string, json.RawMessage, error) {
	ag, err := p.loadAgent(ctx, d)
	if err != nil {
		return "", nil, err
	}
	env, hint := p.envOf(d.AgentID), p.secretHint(ctx, d.AgentID)
	backend, err := stores.Open(ctx, stores.OpenParams{Config: ag.Config.Stores, AgentID: d.AgentID, Env: env, Hint: hint, Platform: p.db})
	if err != nil {
		return "", nil, err
	}
	models := runtime.NewModels(env, nil)
	rt, err := runtime.New(runtime.Options{
		Agent: ag, AgentID: d.AgentID, DeployID: d.ID, Sessions: dbstore.New(p.db), SharedStore: true, Locker: &memstore.Locks{},
		StoreBackend: backend, Models: models, Env: env, SecretHint: hint, ApprovalTimeout: evals.ApprovalTimeout, Logger: p.log,
		DefaultModel: p.defaultModel(), HandlerTimeout: p.cfg.HandlerTimeout, Sandbox: p.sandbox,
	})
	if err != nil {
		_ = backend.Close()
		return "", nil, err
	}
	defer func() { _ = rt.Close(context.WithoutCancel(ctx)) }()
	var judge agent.ModelRef
	if p.cfg.EvalJudgeModel != "" {
		judge, _ = runtime.ParseModel(p.cfg.EvalJudgeModel) // validated with the settings
	}
	state, out, err := evals.RunAgent(ctx, evals.AgentParams{
		Agent: ag, Models: models, JudgeModel: judge, DefaultModel: p.defaultModel(), Runs: p.cfg.EvalRuns, MaxSessionTokens: p.cfg.EvalMaxTokens,
		Chat: func(ctx context.Context, req evals.ChatRequest) (evals.Transcript, error) {
			id, frames, err := rt.RunTurn(ctx, runtime.EvalTurn{Message: req.Message, Context: req.Context, Metadata: req.Metadata,
				MaxSessionTokens: req.MaxSessionTokens, AllowWrites: req.AllowWrites})
			return evals.Transcript{SessionID: id, Frames: frames}, err
		},
	})
	return string(state), out, err
}

// defaultModel is SVC_DEFAULT_MODEL as a model reference.
func (p *platform) defaultModel() agent.ModelRef {
	m, _ := runtime.ParseModel(p.cfg.DefaultModel) // validated with the settings
	return m
}
