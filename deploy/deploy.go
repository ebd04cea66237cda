package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"svc/builder"
	"svc/registry"
	"svc/workers"
)

// Errors callers branch on.
var (
	// ErrNoSource means the agent has nothing to build: no git source and no source version. It is
	// workers.ErrNoSource, which the sources answer with, named here so that callers of deploy
	// need not import workers.
	ErrNoSource = workers.ErrNoSource
	// ErrBadRedeploy is wrapped by a redeploy request that does not fit the agent's source; the
	// message says why.
	ErrBadRedeploy = errors.New("deploy: bad redeploy request")
	// ErrBranchAbsent is wrapped by a redeploy of a branch the repository does not have.
	ErrBranchAbsent = errors.New("deploy: branch not found in the repository")
)

// Pushes records the pushes that built nothing; registry.Pushes implements it.
type Pushes interface {
	Record(ctx context.Context, p registry.Push) error
}

var _ Pushes = (*registry.Pushes)(nil)

// Config is what a Deployer works with. Every field but Commits, Objects, Limits, Credentials and
// Logger is required; their zero values are documented defaults.
type Config struct {
	// Deployments records builds and deployments and finds the ones a push or redeploy reuses.
	Deployments *registry.Deployments
	// Queue carries the builds started to the workers.
	Queue workers.Queue
	// Sources tells agents' sources and settings.
	Sources workers.Sources
	// Pushes keeps the pushes that built nothing.
	Pushes Pushes
	// Credentials resolves the git credentials of agents' sources.
	Credentials builder.Credentials
	// Limits bound the fetch of a pushed commit (zero fields take builder's defaults).
	Limits builder.Limits
	// Commits, when set, hands the commit a push's branch filter fetched to the push's build in
	// this process (svc up, where the API and the builds share one): nothing is stored.
	Commits *workers.CommitCache
	// Objects, when set and Commits is not, stores the tree of the commit a push's branch filter
	// fetched, as a source archive under registry.CommitSourceKey, for the push's build to read
	// on whichever worker runs it instead of fetching the commit again (svc api; the build
	// deletes it when it finishes). With neither, every build fetches its commit.
	Objects registry.Objects
	// Logger receives what the Deployer logs (default slog.Default()).
	Logger *slog.Logger
}

// Deployer applies the push and redeploy policy. It is safe for concurrent use.
type Deployer struct {
	cfg Config
	log *slog.Logger
}

// New returns a Deployer over cfg.
func New(cfg Config) *Deployer {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Deployer{cfg: cfg, log: log}
}

// EnvironmentFor names the environment a push to branch builds.
func EnvironmentFor(branch, productionBranch string) string {
	if branch == productionBranch {
		return registry.Production
	}
	return "preview-" + branch
}

// enqueue hands task, the task of build buildID, to the queue; a build that cannot be queued is
// failed, never left queued forever.
func (d *Deployer) enqueue(ctx context.Context, buildID string, task workers.Task) error {
	err := d.cfg.Queue.Enqueue(ctx, task)
	if err == nil || errors.Is(err, workers.ErrDuplicate) {
		return nil
	}
	if _, ferr := d.cfg.Deployments.FinishBuild(context.WithoutCancel(ctx), buildID, registry.BuildOutcome{Steps: "[]", Error: "could not be queued: " + err.Error()}); ferr != nil {
		d.log.ErrorContext(ctx, "fail unqueued build", "build_id", buildID, "err", ferr)
	}
	return fmt.Errorf("queue build: %w", err)
}
