package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"svc/agent"
	"svc/bundle"
	"svc/evals"
	"svc/githost"
	"svc/registry"
	"svc/runner/runtime"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/memstore"
	"svc/runner/stores"
	"svc/workers"
)

// evalApprovalTimeout denies at once what an eval's tools would ask a person to approve: no one
// answers an eval.
const evalApprovalTimeout = time.Second

// loadAgent opens a deployment's bundle and loads its agent, as a runner does.
func (p *platform) loadAgent(ctx context.Context, d registry.Deployment) (*agent.Agent, error) {
	rc, _, err := p.objects.Get(ctx, d.BundleKey)
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", d.BundleKey, err)
	}
	defer rc.Close() //nolint:errcheck // read-only; a read error is reported by Read
	b, err := bundle.Read(rc, d.BundleKey)
	if err != nil {
		return nil, err
	}
	return b.Agent()
}

// runEvals runs the evals of deployment d on a runtime of its bundle in this process: each eval
// a fresh session in the platform's session store (readable through the deployment's history
// routes), metadata source=eval; the judge is the agent's model.
func (p *platform) runEvals(ctx context.Context, d registry.Deployment) (string, json.RawMessage, error) {
	ag, err := p.loadAgent(ctx, d)
	if err != nil {
		return "", nil, err
	}
	names := make([]string, 0, len(ag.Evals))
	for name := range ag.Evals {
		names = append(names, name)
	}
	slices.Sort(names)
	list := make([]*agent.Eval, 0, len(names))
	for _, n := range names {
		list = append(list, ag.Evals[n])
	}
	env, hint := p.envOf(d.AgentID), p.secretHint(ctx, d.AgentID)
	backend, err := stores.Open(ctx, stores.OpenParams{Config: ag.Config.Stores, AgentID: d.AgentID, Env: env, Hint: hint, Platform: p.db})
	if err != nil {
		return "", nil, err
	}
	models := runtime.NewModels(env, nil)
	rt, err := runtime.New(runtime.Options{
		Agent: ag, AgentID: d.AgentID, DeployID: d.ID, Sessions: dbstore.New(p.db), SharedStore: true, Locker: &memstore.Locks{},
		StoreBackend: backend, Models: models, Env: env, SecretHint: hint, ApprovalTimeout: evalApprovalTimeout, Logger: p.log,
		DefaultModel: p.defaultModel(), HandlerTimeout: p.cfg.HandlerTimeout, Sandbox: p.sandbox,
	})
	if err != nil {
		_ = backend.Close()
		return "", nil, err
	}
	defer func() { _ = rt.Close(context.WithoutCancel(ctx)) }()
	ref, ok := ag.MainModel()
	if !ok {
		ref = p.defaultModel()
	}
	if p.cfg.EvalJudgeModel != "" {
		ref, _ = runtime.ParseModel(p.cfg.EvalJudgeModel) // validated with the settings
	}
	judge, err := models(ref)
	if err != nil {
		return "", nil, fmt.Errorf("judge model %s/%s: %w", ref.Provider, ref.Model, err)
	}
	res, err := evals.Run(ctx, evals.Params{
		Evals: list, Judge: judge, JudgeModel: ref.Model, Runs: p.cfg.EvalRuns, MaxSessionTokens: p.cfg.EvalMaxTokens,
		Chat: func(ctx context.Context, req evals.ChatRequest) (evals.Transcript, error) {
			id, frames, err := rt.RunTurn(ctx, runtime.EvalTurn{Message: req.Message, Context: req.Context, Metadata: req.Metadata,
				MaxSessionTokens: req.MaxSessionTokens, AllowWrites: req.AllowWrites})
			return evals.Transcript{SessionID: id, Frames: frames}, err
		},
	})
	out, merr := json.Marshal(res)
	if err == nil {
		err = merr
	}
	return string(res.State), out, err
}

// defaultModel is SVC_DEFAULT_MODEL as a model reference.
func (p *platform) defaultModel() agent.ModelRef {
	m, _ := runtime.ParseModel(p.cfg.DefaultModel) // validated with the settings
	return m
}

// queueEvals queues a run of deployment d's evals (its commit's svc/evals status goes pending,
// on the git host too).
func (p *platform) queueEvals(ctx context.Context, d registry.Deployment) (registry.EvalRun, error) {
	r, err := workers.QueueEvals(ctx, p.queue, p.stores.EvalRuns, p.stores.CommitStatuses, d)
	if err == nil && d.CommitSHA != "" {
		p.postStatus(ctx, r, string(registry.StatePending), "evals of deployment "+d.ID+" are queued")
	}
	return r, err
}

// postStatus posts the svc/evals status of eval run r to the git host of the agent's source when
// the agent has a host token (the agent secret GITHUB_TOKEN, GITEA_TOKEN or GITLAB_TOKEN), with a
// link to the run's results when SVC_PUBLIC_URL is set. A failure is retried, then logged: it
// never changes the gate, which reads the platform's own statuses.
func (p *platform) postStatus(ctx context.Context, r registry.EvalRun, state, description string) {
	agentID, commit := r.AgentID, r.CommitSHA
	src, err := p.stores.Sources.Get(ctx, agentID)
	if err != nil || src.Type != registry.SourceGit {
		return
	}
	for _, name := range githost.TokenNames {
		token, ok, err := p.stores.Secrets.Resolve(ctx, agentID, name)
		if err != nil || !ok {
			continue
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		st := githost.Status{Commit: commit, State: state, Context: registry.EvalsContext, Description: description}
		if p.cfg.PublicURL != "" {
			st.TargetURL = p.cfg.PublicURL + "/api/deployments/" + r.DeployID + "/evals"
		}
		if err := (githost.Poster{}).Post(pctx, githost.KindOf(name), src.URL, token, st); err != nil {
			p.log.WarnContext(ctx, "post commit status to the git host", "agent_id", agentID, "commit", commit, "err", err)
		}
		return
	}
}

// evalsAfterBuild queues the evals of a deployment a build made ready, when it is a git
// commit's and its agent has evals: the gate of promotion waits for them.
func (p *platform) evalsAfterBuild(ctx context.Context, deployID string) string {
	d, err := p.deploys.Get(ctx, deployID)
	if err != nil || d.CommitSHA == "" {
		return ""
	}
	ag, err := p.loadAgent(ctx, d)
	if err != nil || len(ag.Evals) == 0 {
		return ""
	}
	r, err := p.queueEvals(ctx, d)
	if err != nil {
		p.log.WarnContext(ctx, "queue evals", "deploy_id", deployID, "err", err)
		return "evals could not be queued: " + err.Error()
	}
	return fmt.Sprintf("%d evals queued (run %s); the svc/evals status of the commit is pending", len(ag.Evals), r.ID)
}
