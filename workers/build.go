package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"svc/builder"
	"svc/faults"
	"svc/registry"
)

// TaskBuild is the task type that runs one build.
const TaskBuild = "build:run"

// buildPayload is the payload of a TaskBuild task.
type buildPayload struct {
	BuildID string `json:"buildId"`
	// Trace is the W3C trace context (traceparent, tracestate) of the request that started the
	// build, so that the build's spans join its trace; empty when it was not traced.
	Trace map[string]string `json:"trace,omitempty"`
	// Source is the object key (registry.CommitSourceKey) of the commit's tree that the push
	// stored when it fetched the commit; empty when it stored none (a redeploy, a push under svc
	// up, which hands the commit over in memory, a task that RecoverBuilds queued again, a task
	// of an older version).
	Source string `json:"source,omitempty"`
}

// NewBuildTask returns the task that runs a build; its ID dedupes it. The trace context of ctx,
// if any, travels with it.
func NewBuildTask(ctx context.Context, buildID string) Task {
	return NewPushBuildTask(ctx, buildID, "")
}

// NewPushBuildTask is NewBuildTask for the build of a pushed commit whose tree the push stored
// under sourceKey (registry.CommitSourceKey of the build's agent and commit, stored with
// builder.StoreCommit; "" for none): the build reads the tree there instead of fetching the
// commit again, and deletes the object once it finished.
func NewPushBuildTask(ctx context.Context, buildID, sourceKey string) Task {
	pl := buildPayload{BuildID: buildID, Source: sourceKey}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if len(carrier) > 0 {
		pl.Trace = carrier
	}
	p, _ := json.Marshal(pl) // a struct of strings always marshals
	return Task{Type: TaskBuild, Payload: p, ID: "build:" + buildID}
}

// BuildConfig is what a BuildHandler runs on. Deployments, Logs, Objects and Sources are
// required; the zero values of the others are documented defaults.
type BuildConfig struct {
	Deployments *registry.Deployments
	Logs        *registry.BuildLogs
	Objects     registry.Objects
	Sources     Sources
	// Credentials resolves the git credentials of agents' sources.
	Credentials builder.Credentials
	// Limits bound each fetch and build (zero fields take builder's defaults).
	Limits builder.Limits
	// Commits, when set, gives a build the commit its push's branch check fetched in this
	// process (svc up, where the API and the builds share one). Whether or not it is set, a build
	// whose task names a tree the push stored (NewPushBuildTask) reads that; a build with
	// neither fetches its commit.
	Commits *CommitCache
	// Statuses, when set, gets a pending svc/evals status for a git commit whose tree has evals
	// before its deployment is marked ready: the promotion gate stays closed from the first
	// moment the deployment could be promoted until its evals report (OnReady queues them), even
	// if this process dies in between.
	Statuses *registry.CommitStatuses
	// OnReady, when set, is told of each deployment a build made ready (to queue its evals); a
	// line it returns goes to the build log.
	OnReady func(ctx context.Context, deployID string) string
	// Metrics, when set, counts builds by outcome and times their steps.
	Metrics *BuildMetrics
	// Tracer, when set, records a span per build attempt with its steps, in the trace of the
	// request that started the build.
	Tracer trace.Tracer
	// Logger receives what the handler logs (default slog.Default()).
	Logger *slog.Logger
}

// BuildHandler is the handler of TaskBuild: it fetches a build's source, builds it and records
// the outcome, and, as a FailureHandler, marks failed a build whose task gives up. It is safe for
// concurrent use.
type BuildHandler struct {
	cfg BuildConfig
	log *slog.Logger
}

var _ FailureHandler = (*BuildHandler)(nil)

// NewBuildHandler returns the build task handler over cfg.
func NewBuildHandler(cfg BuildConfig) *BuildHandler {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &BuildHandler{cfg: cfg, log: log}
}

// stepJSON is one build step as the API shows it.
type stepJSON struct {
	Name       string `json:"name"`
	Status     string `json:"status"`
	DurationMs int64  `json:"durationMs"`
}

func stepsJSON(steps []builder.Step) string {
	out := make([]stepJSON, len(steps))
	for i, s := range steps {
		out[i] = stepJSON{Name: s.Name, Status: s.Status, DurationMs: s.Duration.Milliseconds()}
	}
	b, _ := json.Marshal(out) // a slice of plain structs always marshals
	return string(b)
}

// warningsJSON is a build's warnings as the API shows them: a JSON array, [] for none.
func warningsJSON(warnings []string) string {
	b, _ := json.Marshal(append([]string{}, warnings...)) // strings always marshal
	return string(b)
}

// ProcessTask implements Handler: it runs a build task: fetch, build, record. It is idempotent:
// a build that already finished is left alone, and a build redelivered after a crash runs again
// from the start.
func (h *BuildHandler) ProcessTask(ctx context.Context, t Task) (err error) {
	var pl buildPayload
	if err := json.Unmarshal(t.Payload, &pl); err != nil || pl.BuildID == "" {
		return fmt.Errorf("%w: bad build payload", ErrSkipRetry)
	}
	b, err := h.cfg.Deployments.BuildRunning(ctx, pl.BuildID)
	if errors.Is(err, registry.ErrBuildFinished) || errors.Is(err, registry.ErrBuildNotFound) {
		h.dropSource(ctx, pl) // a task delivered again after its build finished
		return nil
	}
	if err != nil {
		return err
	}
	var steps []builder.Step
	ctx, endSpan := h.buildSpan(ctx, pl, b)
	defer func() { endSpan(steps, err) }()
	log := func(step, line string) {
		if err := h.cfg.Logs.Append(context.WithoutCancel(ctx), b.ID, step, line); err != nil {
			h.log.WarnContext(ctx, "append build log", "build_id", b.ID, "err", err)
		}
	}
	if b.Attempts > 1 {
		// An attempt that failed wrote a retry line last; any other last line means its worker
		// stopped in the middle (killed, or cut off past its lease).
		if last, err := h.cfg.Logs.Last(ctx, b.ID); err == nil && last.Step != stepRetry {
			log("start", fmt.Sprintf("attempt %d was interrupted: its worker stopped before the build finished; this worker takes the build over", b.Attempts-1))
		}
	}
	log("start", fmt.Sprintf("build %s of %s (attempt %d)", b.ID, describe(b), b.Attempts))
	// A push's build whose task names no stored tree (queued again by RecoverBuilds after the
	// process that took the push died between storing the tree and queueing the task; a task of
	// an older version) looks at its commit's key all the same, and deletes what is there when it
	// finishes: no tree a push stored outlives the push's build.
	named := pl.Source != ""
	if !named && b.Trigger == "push" && b.CommitSHA != "" {
		pl.Source = registry.CommitSourceKey(b.AgentID, b.CommitSHA)
	}
	src, err := h.cfg.Sources.AgentSource(ctx, b.AgentID)
	if err != nil {
		return retryLater(b, log, err)
	}

	// 1. Fetch the source tree, unless the push handed over the commit it fetched (in memory, or
	// stored in the object store).
	started := time.Now()
	faults.Point("build.fetch")
	tree, res, from, err := h.source(ctx, src, b, pl.Source, named, log)
	fetch := builder.Step{Name: "fetch", Status: builder.StepSucceeded, Duration: time.Since(started)}
	switch {
	case err != nil:
		fetch.Status = builder.StepFailed
		log("fetch", "fetch failed: "+err.Error())
		steps = []builder.Step{fetch}
		if permanent(err) {
			return h.fail(ctx, b, pl, steps, err)
		}
		h.cfg.Metrics.done("retried", steps)
		return retryLater(b, log, err)
	case from == fromPush:
		log("fetch", fmt.Sprintf("%s was fetched by the push's branch check", describe(b)))
	case from == fromStore:
		log("fetch", fmt.Sprintf("read the tree of %s that the push fetched and stored, in %d ms", describe(b), fetch.Duration.Milliseconds()))
	default:
		log("fetch", fmt.Sprintf("fetched %s in %d ms", describe(b), fetch.Duration.Milliseconds()))
	}

	// 2. Validate, compile, pack and upload.
	result, err := builder.Build(ctx, builder.BuildInput{
		Source: tree, Commit: res.Commit, Branch: b.Branch, SourceVersionID: b.SourceVersionID, AgentSlug: src.Slug, Limits: h.cfg.Limits,
		// The env: references the agent makes, checked as a runtime resolves them: a warning
		// for each one that is not set.
		IsSet: func(ctx context.Context, name string) (bool, error) {
			return h.cfg.Credentials.IsSet(ctx, b.AgentID, name)
		},
	}, h.cfg.Objects, log)
	steps = append([]builder.Step{fetch}, result.Steps...)
	if err != nil {
		if permanent(err) || errors.Is(err, context.DeadlineExceeded) {
			return h.fail(ctx, b, pl, steps, err)
		}
		h.cfg.Metrics.done("retried", steps)
		return retryLater(b, log, err)
	}

	// 3. Record the deployment; activate per the environment's rules, unless a deployment of the
	// environment requested later is in flight or ready (newest requested wins).
	activate := b.Environment != registry.Production || src.AutoPromoteProduction
	if err := h.holdGate(ctx, b, res.Commit, tree); err != nil {
		h.cfg.Metrics.done("retried", steps)
		return retryLater(b, log, err)
	}
	faults.Point("build.activate")
	// FinishBuild writes the last line in the transaction that marks the build finished, so a
	// follower that stops at the finished status has seen every line.
	_, err = h.cfg.Deployments.FinishBuild(context.WithoutCancel(ctx), b.ID, registry.BuildOutcome{
		Steps: stepsJSON(steps), Warnings: warningsJSON(result.Warnings), BundleKey: result.BundleKey, Digest: result.BundleDigest, Activate: activate, Actor: "build",
		Done: doneLine,
	})
	switch {
	case errors.Is(err, registry.ErrBuildFinished):
		h.dropSource(ctx, pl)
		return nil
	case err != nil:
		h.cfg.Metrics.done("retried", steps)
		return retryLater(b, log, err)
	}
	h.dropSource(ctx, pl)
	h.cfg.Metrics.done("succeeded", steps)
	if h.cfg.OnReady != nil {
		if line := h.cfg.OnReady(context.WithoutCancel(ctx), b.DeployID); line != "" {
			log("evals", line)
		}
	}
	return nil
}

// doneLine is a successful build's last log line: whether its deployment d became active, and
// if not, why (newer is the deployment requested later that held it back, nil when none did).
func doneLine(d registry.Deployment, newer *registry.Deployment) string {
	switch {
	case d.IsActive:
		return fmt.Sprintf("deployment %s ready and active in %s", d.ID, d.Environment)
	case newer != nil:
		return fmt.Sprintf("deployment %s ready; not activated: deployment %s, requested later, is newer (%s); activate %s to serve it",
			d.ID, newer.ID, newer.Status, d.ID)
	default:
		return fmt.Sprintf("deployment %s ready, not active (autoPromoteProduction is off): activate it to serve", d.ID)
	}
}

func describe(b registry.Build) string {
	if b.CommitSHA != "" {
		short := b.CommitSHA
		if len(short) > 12 {
			short = short[:12]
		}
		return "commit " + short + " on " + b.Branch
	}
	return "source version " + b.SourceVersionID
}

// permanent reports whether a build error cannot get better by retrying: the builder's own
// (builder.Permanent: among others a branch or commit that is not there), an agent with no
// source, a source version that is not there.
func permanent(err error) bool {
	return builder.Permanent(err) || errors.Is(err, ErrNoSource) || errors.Is(err, registry.ErrNotFound)
}

// stepRetry is the log step of the line an attempt that failed for a passing reason writes last.
const stepRetry = "retry"

// retryLater logs that attempt b.Attempts failed for a reason that may pass and returns err for the
// queue to retry with backoff (TaskFailed records the last error once retries run out).
func retryLater(b registry.Build, log func(step, line string), err error) error {
	log(stepRetry, fmt.Sprintf("attempt %d failed: %v; the queue tries again with backoff", b.Attempts, err))
	return err
}

// holdGate records a pending svc/evals status for a git commit whose tree has evals (see
// BuildConfig.Statuses).
func (h *BuildHandler) holdGate(ctx context.Context, b registry.Build, commit string, tree fs.FS) error {
	if h.cfg.Statuses == nil || commit == "" || b.SourceVersionID != "" {
		return nil
	}
	if evals, _ := fs.Glob(tree, "evals/*.md"); len(evals) == 0 {
		return nil
	}
	_, err := h.cfg.Statuses.Add(context.WithoutCancel(ctx), registry.CommitStatus{AgentID: b.AgentID, Commit: commit,
		Context: registry.EvalsContext, State: registry.StatePending, Description: "evals of deployment " + b.DeployID + " run once it is ready"})
	if err != nil {
		return fmt.Errorf("hold the promotion gate for the evals: %w", err)
	}
	return nil
}

// treeOrigin says where a build's tree came from, for its log.
type treeOrigin int

const (
	fromSource treeOrigin = iota // fetched, or an uploaded source version
	fromPush                     // the commit the push's branch check fetched in this process (Commits)
	fromStore                    // the tree the push stored (its task's Source)
)

// source reads the tree a build builds: an uploaded source version, or the git commit: taken
// from Commits when the push's branch check fetched it in this process, read from the object the
// push stored under sourceKey when there is one, else fetched. An object that is missing or
// unreadable is logged (a missing one only when the task named it) and the commit fetched instead.
func (h *BuildHandler) source(ctx context.Context, src AgentSource, b registry.Build, sourceKey string, named bool, log func(step, line string)) (tree fs.FS, res builder.FetchResult, from treeOrigin, err error) {
	if b.SourceVersionID != "" {
		sv, err := h.cfg.Sources.SourceVersion(ctx, b.AgentID, b.SourceVersionID)
		if err != nil {
			return nil, builder.FetchResult{}, fromSource, err
		}
		tree, err := builder.ReadSourceVersion(ctx, h.cfg.Objects, sv.ObjectKey, h.cfg.Limits)
		return tree, builder.FetchResult{Branch: b.Branch}, fromSource, err
	}
	if src.Type != "git" {
		return nil, builder.FetchResult{}, fromSource, ErrNoSource
	}
	if commit, ok := h.cfg.Commits.Take(src, b.Branch, b.CommitSHA); ok {
		tree, err := commit.Tree(ctx)
		return tree, commit.Result(), fromPush, err
	}
	if key := h.sourceKey(b, sourceKey); key != "" {
		tree, err := builder.ReadSourceVersion(ctx, h.cfg.Objects, key, h.cfg.Limits)
		if err == nil {
			return tree, builder.FetchResult{Commit: b.CommitSHA, Branch: b.Branch}, fromStore, nil
		}
		if named || !errors.Is(err, registry.ErrNotFound) {
			h.log.WarnContext(ctx, "read the tree the push stored; fetching the commit instead", "build_id", b.ID, "key", key, "err", err)
			log("fetch", fmt.Sprintf("the tree the push stored cannot be read (%v); fetching %s", err, describe(b)))
		}
	}
	gs, err := src.Git(ctx, h.cfg.Credentials, b.Branch, b.CommitSHA)
	if err != nil {
		return nil, builder.FetchResult{}, fromSource, err
	}
	commit, err := builder.FetchCommit(ctx, gs, h.cfg.Limits)
	if err != nil {
		return nil, builder.FetchResult{}, fromSource, err
	}
	tree, err = commit.Tree(ctx)
	return tree, commit.Result(), fromSource, err
}

// sourceKey is the key of the stored tree a build of a git commit may read: sourceKey, the key
// its task names, when it is the key of the build's own agent and commit; "" otherwise (a task
// names no other object, however it was written).
func (h *BuildHandler) sourceKey(b registry.Build, sourceKey string) string {
	if sourceKey == "" || b.CommitSHA == "" || sourceKey != registry.CommitSourceKey(b.AgentID, b.CommitSHA) {
		return ""
	}
	return sourceKey
}

// dropSource deletes the tree the push of a finished build stored (its task's Source), so that
// the object lives only as long as the build: after the build succeeded, failed for good or gave
// up. A build that will run again keeps it. A failed delete is logged; the object is then left.
func (h *BuildHandler) dropSource(ctx context.Context, pl buildPayload) {
	if pl.Source == "" || !strings.HasPrefix(pl.Source, "commits/") {
		return
	}
	if err := h.cfg.Objects.Delete(context.WithoutCancel(ctx), pl.Source); err != nil {
		h.log.WarnContext(ctx, "delete the tree the push stored", "build_id", pl.BuildID, "key", pl.Source, "err", err)
	}
}

// fail records a build's failure with every reason; the task itself is done (no retry).
func (h *BuildHandler) fail(ctx context.Context, b registry.Build, pl buildPayload, steps []builder.Step, cause error) error {
	h.dropSource(ctx, pl)
	h.cfg.Metrics.done("failed", steps)
	_, err := h.cfg.Deployments.FinishBuild(context.WithoutCancel(ctx), b.ID, registry.BuildOutcome{Steps: stepsJSON(steps), Error: cause.Error()})
	if err != nil && !errors.Is(err, registry.ErrBuildFinished) {
		return err
	}
	return nil
}

// TaskFailed implements FailureHandler: a build task that gave up (its last attempt failed,
// panicked, timed out or was lost with its worker) marks its build failed with the reason.
func (h *BuildHandler) TaskFailed(ctx context.Context, t Task, cause error) {
	var pl buildPayload
	if json.Unmarshal(t.Payload, &pl) != nil {
		return
	}
	h.dropSource(ctx, pl)
	h.cfg.Metrics.done("gave_up", nil)
	_, err := h.cfg.Deployments.FinishBuild(ctx, pl.BuildID, registry.BuildOutcome{Steps: "[]", Error: "build gave up: " + cause.Error()})
	if err != nil && !errors.Is(err, registry.ErrBuildFinished) {
		h.log.ErrorContext(ctx, "record failed build", "build_id", pl.BuildID, "err", err)
	}
}

// RecoverBuilds enqueues every build still queued: a process that died between recording a build
// and enqueueing it leaves one behind. Dedupe by build ID makes it safe to call at every start.
func RecoverBuilds(ctx context.Context, q Queue, deployments *registry.Deployments) (int, error) {
	ids, err := deployments.Queued(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		err := q.Enqueue(ctx, NewBuildTask(ctx, id))
		switch {
		case err == nil:
			n++
		case errors.Is(err, ErrDuplicate):
		default:
			return n, fmt.Errorf("re-enqueue build %s: %w", id, err)
		}
	}
	return n, nil
}
