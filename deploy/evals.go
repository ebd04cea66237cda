package deploy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"svc/builder"
	"svc/githost"
	"svc/registry"
	"svc/workers"
)

// EvalsConfig is what an Evals works with. Every field but PublicURL and Logger is required.
type EvalsConfig struct {
	// Deployments finds the deployment a build made ready.
	Deployments *registry.Deployments
	// Runs records the eval runs; Statuses the svc/evals commit statuses that gate promotion.
	Runs     *registry.EvalRuns
	Statuses *registry.CommitStatuses
	// Sources and Secrets tell an agent's git host and the token to post its statuses with.
	Sources *registry.Sources
	Secrets *registry.Secrets
	// Objects holds the bundles, opened to find a deployment's evals.
	Objects registry.Objects
	// Queue carries the eval runs to the workers (workers.EvalHandler).
	Queue workers.Queue
	// PublicURL, when set, is the platform's public address: a status posted to the git host
	// links to the run's results there.
	PublicURL string
	// Logger receives what cannot be reported otherwise (default slog.Default()).
	Logger *slog.Logger
}

// Evals is the eval policy of deployments: a build that makes a git commit's deployment ready
// queues its evals, so that the commit's svc/evals status is pending until they report and the
// promotion gate (Lifecycle.Promote) waits for them; an operator may queue them again; and each
// svc/evals status recorded is also posted to the agent's git host when the agent has a token
// for it. The evals themselves run in workers.EvalHandler. It is safe for concurrent use.
type Evals struct {
	cfg EvalsConfig
	log *slog.Logger
}

// NewEvals returns an Evals over cfg.
func NewEvals(cfg EvalsConfig) *Evals {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Evals{cfg: cfg, log: log}
}

// Queue queues a run of deployment d's evals; its commit's svc/evals status goes pending, on the
// git host too.
func (e *Evals) Queue(ctx context.Context, d registry.Deployment) (registry.EvalRun, error) {
	r, err := workers.QueueEvals(ctx, e.cfg.Queue, e.cfg.Runs, e.cfg.Statuses, d)
	if err == nil && d.CommitSHA != "" {
		e.Post(ctx, r, string(registry.StatePending), "evals of deployment "+d.ID+" are queued")
	}
	return r, err
}

// AfterBuild queues the evals of deployment deployID, which a build made ready, when it is a git
// commit's and its agent has evals. It returns a line for the build's log ("" when nothing was
// queued); it is workers.BuildConfig.OnReady.
func (e *Evals) AfterBuild(ctx context.Context, deployID string) string {
	d, err := e.cfg.Deployments.Get(ctx, deployID)
	if err != nil || d.CommitSHA == "" {
		return ""
	}
	_, ag, err := builder.OpenStored(ctx, e.cfg.Objects, d.BundleKey)
	if err != nil || len(ag.Evals) == 0 {
		return ""
	}
	r, err := e.Queue(ctx, d)
	if err != nil {
		e.log.WarnContext(ctx, "queue evals", "deploy_id", deployID, "err", err)
		return "evals could not be queued: " + err.Error()
	}
	return fmt.Sprintf("%d evals queued (run %s); the svc/evals status of the commit is pending", len(ag.Evals), r.ID)
}

// Post posts the svc/evals status of eval run r to the git host of the agent's source when the
// agent has a host token (the agent secret GITHUB_TOKEN, GITEA_TOKEN or GITLAB_TOKEN), with a
// link to the run's results when PublicURL is set. A failure is retried, then logged: it never
// changes the gate, which reads the platform's own statuses. It is workers.EvalHandler.Notify.
func (e *Evals) Post(ctx context.Context, r registry.EvalRun, state, description string) {
	src, err := e.cfg.Sources.Get(ctx, r.AgentID)
	if err != nil || src.Type != registry.SourceGit {
		return
	}
	for _, name := range githost.TokenNames {
		token, ok, err := e.cfg.Secrets.Resolve(ctx, r.AgentID, name)
		if err != nil || !ok {
			continue
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		st := githost.Status{Commit: r.CommitSHA, State: state, Context: registry.EvalsContext, Description: description}
		if e.cfg.PublicURL != "" {
			st.TargetURL = e.cfg.PublicURL + "/api/deployments/" + r.DeployID + "/evals"
		}
		if err := (githost.Poster{}).Post(pctx, githost.KindOf(name), src.URL, token, st); err != nil {
			e.log.WarnContext(ctx, "post commit status to the git host", "agent_id", r.AgentID, "commit", r.CommitSHA, "err", err)
		}
		return
	}
}
