package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"svc/agent"
	"svc/builder"
	"svc/registry"
	"svc/webhook"
)

// TaskBuild is the task type that runs one build.
const TaskBuild = "build:run"

// buildPayload is the payload of a TaskBuild task.
type buildPayload struct {
	BuildID string `json:"buildId"`
}

// NewBuildTask returns the task that runs a build; its ID dedupes it.
func NewBuildTask(buildID string) Task {
	p, _ := json.Marshal(buildPayload{BuildID: buildID}) // a struct of strings always marshals
	return Task{Type: TaskBuild, Payload: p, ID: "build:" + buildID}
}

// AgentSource is what the pipeline needs to know of an agent: its source and deploy settings.
type AgentSource struct {
	AgentID string
	Slug    string
	// Type is "git" or "hosted"; "" when no source is connected.
	Type          string
	URL           string
	DefaultBranch string
	Credentials   string // "env:VAR" naming "user:token" or a token, or ""
	// Deploy settings (spec 2.2), with their defaults applied.
	ProductionBranch      string
	AutoDeploy            bool
	AutoPromoteProduction bool
}

// SourceVersion is a stored hosted source tree.
type SourceVersion struct {
	ID        string
	ObjectKey string
}

// Sources answers the pipeline's questions about agents. Implementations read the registry.
type Sources interface {
	// AgentSource returns the agent's source and settings.
	AgentSource(ctx context.Context, agentID string) (AgentSource, error)
	// SourceVersion returns a hosted source version, or with id "" the agent's newest; none is ErrNoSource.
	SourceVersion(ctx context.Context, agentID, id string) (SourceVersion, error)
	// RecordPush keeps a push that built nothing, so operators see what arrived.
	RecordPush(ctx context.Context, agentID string, p webhook.Push) error
}

// Errors of the pipeline.
var (
	ErrNoSource     = errors.New("workers: agent has no source to build")
	ErrBadRedeploy  = errors.New("workers: bad redeploy request")
	ErrBranchAbsent = errors.New("workers: branch not found in the repository")
)

// Pipeline decides what pushes and redeploys build (spec table 3.1) and runs builds: it is the
// handler of TaskBuild, and owns a build whose task fails for good. It is safe for concurrent use.
type Pipeline struct {
	Deployments *registry.Deployments
	Logs        *registry.BuildLogs
	Objects     registry.Objects
	Queue       Queue
	Sources     Sources
	Limits      builder.Limits
	Logger      *slog.Logger
	// Credentials resolves the git credentials of agents' sources.
	Credentials builder.Credentials
	// Commits, when set, hands the commit a push's branch filter fetched to the push's build (for
	// a process that does both); nil fetches twice.
	Commits *CommitCache
}

func (p *Pipeline) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

var _ FailureHandler = (*Pipeline)(nil)

// EnvironmentFor names the environment a push to branch builds.
func EnvironmentFor(branch, productionBranch string) string {
	if branch == productionBranch {
		return registry.Production
	}
	return "preview-" + branch
}

// PushOutcome is the answer to a push (CONTRACT §4).
type PushOutcome struct {
	Action      string `json:"action"` // build | recorded | skipped
	Reason      string `json:"reason"`
	BuildID     string `json:"buildId,omitempty"`
	DeployID    string `json:"deployId,omitempty"`
	Environment string `json:"environment"`
}

// Push applies the build rows of spec table 3.1 to a push of the agent's connected repository.
func (p *Pipeline) Push(ctx context.Context, agentID string, push webhook.Push) (PushOutcome, error) {
	src, err := p.Sources.AgentSource(ctx, agentID)
	if err != nil {
		return PushOutcome{}, err
	}
	out := PushOutcome{Environment: EnvironmentFor(push.Branch, src.ProductionBranch)}
	switch {
	case push.Tag != "" || push.Branch == "":
		return PushOutcome{Action: "skipped", Reason: "tag"}, nil
	case push.Deleted:
		return PushOutcome{Action: "skipped", Reason: "branch-deleted", Environment: out.Environment}, nil
	case !src.AutoDeploy:
		if err := p.Sources.RecordPush(ctx, agentID, push); err != nil {
			return PushOutcome{}, err
		}
		out.Action, out.Reason = "recorded", "auto-deploy-off"
		return out, nil
	}
	// ci.deploy.branches of the pushed commit's svc.json restrict which pushes build.
	if filtered, err := p.branchFiltered(ctx, src, push); err != nil {
		p.logger().WarnContext(ctx, "read ci.deploy of pushed commit", "agent", agentID, "commit", push.After, "err", err)
	} else if filtered {
		out.Action, out.Reason = "skipped", "branch-filtered"
		return out, nil
	}
	st, err := p.Deployments.StartBuild(ctx, registry.BuildRequest{
		AgentID: agentID, Environment: out.Environment, Branch: push.Branch, Commit: push.After, Trigger: "push", Reuse: true,
	})
	if err != nil {
		return PushOutcome{}, err
	}
	out.BuildID, out.DeployID = st.Build.ID, st.Deployment.ID
	if st.Reused {
		p.Commits.take(src.commitKey(push.Branch, push.After)) // no build will take it
		out.Action, out.Reason = "skipped", "already-built"
		if st.Building {
			out.Reason = "already-building"
		}
		return out, nil
	}
	if err := p.enqueue(ctx, st.Build.ID); err != nil {
		return PushOutcome{}, err
	}
	out.Action, out.Reason = "build", "push"
	return out, nil
}

// enqueue hands a build to the queue; a build that cannot be queued is failed, never left queued forever.
func (p *Pipeline) enqueue(ctx context.Context, buildID string) error {
	err := p.Queue.Enqueue(ctx, NewBuildTask(buildID))
	if err == nil || errors.Is(err, ErrDuplicate) {
		return nil
	}
	if _, ferr := p.Deployments.FinishBuild(context.WithoutCancel(ctx), buildID, registry.BuildOutcome{Steps: "[]", Error: "could not be queued: " + err.Error()}); ferr != nil {
		p.logger().ErrorContext(ctx, "fail unqueued build", "build_id", buildID, "err", ferr)
	}
	return fmt.Errorf("queue build: %w", err)
}

// branchFiltered reads svc.json at the pushed commit, and nothing else of its tree, and applies
// ci.deploy.branches. A commit that may build is kept in Commits for its build.
func (p *Pipeline) branchFiltered(ctx context.Context, src AgentSource, push webhook.Push) (bool, error) {
	commit, err := p.fetch(ctx, src, push.Branch, push.After)
	if err != nil {
		return false, err
	}
	files, err := commit.Files(ctx, "svc.json")
	if err != nil {
		return false, err
	}
	f, err := agent.DeployFilterOf(files)
	filtered := err == nil && !f.Allows(push.Branch)
	if err == nil && !filtered {
		p.Commits.put(src.commitKey(push.Branch, push.After), commit)
	}
	return filtered, err
}

// RedeployRequest is the body of POST /api/deployments/redeploy.
type RedeployRequest struct {
	AgentID         string
	Branch          string
	Environment     string
	SourceVersionID string
	ReuseBuild      bool
}

// RedeployOutcome is the answer of a redeploy.
type RedeployOutcome struct {
	DeployID    string `json:"deployId"`
	BuildID     string `json:"buildId"`
	Environment string `json:"environment"`
	Reused      bool   `json:"reused,omitempty"`
}

// Redeploy starts a build of the branch head (git) or of a source version (hosted), or with
// ReuseBuild returns the environment's newest non-failed build of that commit, or the one in flight.
func (p *Pipeline) Redeploy(ctx context.Context, req RedeployRequest) (RedeployOutcome, error) {
	src, err := p.Sources.AgentSource(ctx, req.AgentID)
	if err != nil {
		return RedeployOutcome{}, err
	}
	br := registry.BuildRequest{AgentID: req.AgentID, Environment: req.Environment, Trigger: "redeploy", Reuse: req.ReuseBuild}
	switch src.Type {
	case "git":
		if req.SourceVersionID != "" {
			return RedeployOutcome{}, fmt.Errorf("%w: sourceVersionId applies to hosted sources only", ErrBadRedeploy)
		}
		// Spec 4.1: environment defaults to production, branch to the source's default branch
		// (for a preview-<branch> environment, that branch).
		br.Branch = req.Branch
		if br.Environment == "" {
			br.Environment = registry.Production
		}
		if br.Branch == "" {
			br.Branch = src.DefaultBranch
			if b, ok := strings.CutPrefix(br.Environment, "preview-"); ok {
				br.Branch = b
			}
		}
		if br.Commit, err = p.head(ctx, src, br.Branch); err != nil {
			return RedeployOutcome{}, err
		}
	case "hosted", "":
		// An agent with no connected source builds its uploaded source versions, like a hosted one.
		if req.Branch != "" {
			return RedeployOutcome{}, fmt.Errorf("%w: branch applies to git sources only", ErrBadRedeploy)
		}
		if br.Environment == "" {
			br.Environment = registry.Production
		}
		sv, err := p.Sources.SourceVersion(ctx, req.AgentID, req.SourceVersionID)
		if err != nil {
			return RedeployOutcome{}, err
		}
		br.SourceVersionID = sv.ID
	default:
		return RedeployOutcome{}, fmt.Errorf("%w: unknown source type %q", ErrNoSource, src.Type)
	}
	st, err := p.Deployments.StartBuild(ctx, br)
	if err != nil {
		return RedeployOutcome{}, err
	}
	out := RedeployOutcome{DeployID: st.Deployment.ID, BuildID: st.Build.ID, Environment: br.Environment, Reused: st.Reused}
	if !st.Reused {
		if err := p.enqueue(ctx, st.Build.ID); err != nil {
			return RedeployOutcome{}, err
		}
	}
	return out, nil
}

// head resolves a branch's head commit on the remote (git ls-remote).
func (p *Pipeline) head(ctx context.Context, src AgentSource, branch string) (string, error) {
	auth, err := p.Credentials.GitAuth(ctx, src.AgentID, src.Credentials)
	if err != nil {
		return "", err
	}
	head, err := builder.BranchHead(ctx, builder.GitSource{URL: src.URL, Branch: branch, Auth: auth})
	if errors.Is(err, builder.ErrBranchNotFound) {
		return "", fmt.Errorf("%w: %q", ErrBranchAbsent, branch)
	}
	return head, err
}

// fetch fetches commit on branch of src's repository, without reading its tree.
func (p *Pipeline) fetch(ctx context.Context, src AgentSource, branch, commit string) (*builder.GitCommit, error) {
	auth, err := p.Credentials.GitAuth(ctx, src.AgentID, src.Credentials)
	if err != nil {
		return nil, err
	}
	return builder.FetchCommit(ctx, builder.GitSource{URL: src.URL, Branch: branch, Commit: commit, Auth: auth}, p.Limits)
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

// ProcessTask runs a build task: fetch, build, record. It is idempotent: a build that already
// finished is left alone, and a build redelivered after a crash runs again from the start.
func (p *Pipeline) ProcessTask(ctx context.Context, t Task) error {
	var pl buildPayload
	if err := json.Unmarshal(t.Payload, &pl); err != nil || pl.BuildID == "" {
		return fmt.Errorf("%w: bad build payload", ErrSkipRetry)
	}
	b, err := p.Deployments.BuildRunning(ctx, pl.BuildID)
	if errors.Is(err, registry.ErrBuildFinished) || errors.Is(err, registry.ErrBuildNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	log := func(step, line string) {
		if err := p.Logs.Append(context.WithoutCancel(ctx), b.ID, step, line); err != nil {
			p.logger().WarnContext(ctx, "append build log", "build_id", b.ID, "err", err)
		}
	}
	if b.Attempts > 1 {
		// An attempt that failed wrote a retry line last; any other last line means its worker
		// stopped in the middle (killed, or cut off past its lease).
		if last, err := p.Logs.Last(ctx, b.ID); err == nil && last.Step != stepRetry {
			log("start", fmt.Sprintf("attempt %d was interrupted: its worker stopped before the build finished; this worker takes the build over", b.Attempts-1))
		}
	}
	log("start", fmt.Sprintf("build %s of %s (attempt %d)", b.ID, describe(b), b.Attempts))
	src, err := p.Sources.AgentSource(ctx, b.AgentID)
	if err != nil {
		return retryLater(b, log, err)
	}

	// 1. Fetch the source tree, unless the push's branch check has just done so.
	started := time.Now()
	tree, res, fetched, err := p.source(ctx, src, b)
	fetch := builder.Step{Name: "fetch", Status: builder.StepSucceeded, Duration: time.Since(started)}
	switch {
	case err != nil:
		fetch.Status = builder.StepFailed
		log("fetch", "fetch failed: "+err.Error())
		if permanent(err) {
			return p.fail(ctx, b, []builder.Step{fetch}, err)
		}
		return retryLater(b, log, err)
	case fetched:
		log("fetch", fmt.Sprintf("%s was fetched by the push's branch check", describe(b)))
	default:
		log("fetch", fmt.Sprintf("fetched %s in %d ms", describe(b), fetch.Duration.Milliseconds()))
	}

	// 2. Validate, compile, pack and upload.
	result, err := builder.Build(ctx, builder.BuildInput{
		Source: tree, Commit: res.Commit, Branch: b.Branch, SourceVersionID: b.SourceVersionID, AgentSlug: src.Slug, Limits: p.Limits,
	}, p.Objects, log)
	steps := append([]builder.Step{fetch}, result.Steps...)
	if err != nil {
		if permanent(err) || errors.Is(err, context.DeadlineExceeded) {
			return p.fail(ctx, b, steps, err)
		}
		return retryLater(b, log, err)
	}

	// 3. Record the deployment; activate per the environment's rules.
	activate := b.Environment != registry.Production || src.AutoPromoteProduction
	// The last line goes out before the build is marked finished, so a follower that stops at
	// the finished status has seen every line.
	if activate {
		log("done", fmt.Sprintf("deployment %s ready and active in %s", b.DeployID, b.Environment))
	} else {
		log("done", fmt.Sprintf("deployment %s ready, not active (autoPromoteProduction is off): activate it to serve", b.DeployID))
	}
	_, err = p.Deployments.FinishBuild(context.WithoutCancel(ctx), b.ID, registry.BuildOutcome{
		Steps: stepsJSON(steps), BundleKey: result.BundleKey, Digest: result.BundleDigest, Activate: activate, Actor: "build",
	})
	switch {
	case errors.Is(err, registry.ErrBuildFinished):
		return nil
	case err != nil:
		return retryLater(b, log, err)
	}
	return nil
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
// (builder.Permanent), an agent with no source, a branch or a source version that is not there.
func permanent(err error) bool {
	return builder.Permanent(err) || errors.Is(err, ErrNoSource) || errors.Is(err, ErrBranchAbsent) || errors.Is(err, registry.ErrNotFound)
}

// stepRetry is the log step of the line an attempt that failed for a passing reason writes last.
const stepRetry = "retry"

// retryLater logs that attempt b.Attempts failed for a reason that may pass and returns err for the
// queue to retry with backoff (TaskFailed records the last error once retries run out).
func retryLater(b registry.Build, log func(step, line string), err error) error {
	log(stepRetry, fmt.Sprintf("attempt %d failed: %v; the queue tries again with backoff", b.Attempts, err))
	return err
}

// source reads the tree a build builds: an uploaded source version, or the git commit, taken
// from Commits when the push's branch check fetched it already (fetched is then true).
func (p *Pipeline) source(ctx context.Context, src AgentSource, b registry.Build) (tree fs.FS, res builder.FetchResult, fetched bool, err error) {
	if b.SourceVersionID != "" {
		sv, err := p.Sources.SourceVersion(ctx, b.AgentID, b.SourceVersionID)
		if err != nil {
			return nil, builder.FetchResult{}, false, err
		}
		rc, _, err := p.Objects.Get(ctx, sv.ObjectKey)
		if err != nil {
			return nil, builder.FetchResult{}, false, fmt.Errorf("read source version %s: %w", sv.ID, err)
		}
		defer func() { _ = rc.Close() }() // read-only: a close error changes nothing
		tree, err := builder.ReadTarGz(io.Reader(rc), p.Limits)
		return tree, builder.FetchResult{Branch: b.Branch}, false, err
	}
	if src.Type != "git" {
		return nil, builder.FetchResult{}, false, ErrNoSource
	}
	commit, fetched := p.Commits.take(src.commitKey(b.Branch, b.CommitSHA))
	if !fetched {
		if commit, err = p.fetch(ctx, src, b.Branch, b.CommitSHA); err != nil {
			return nil, builder.FetchResult{}, false, err
		}
	}
	tree, err = commit.Tree(ctx)
	return tree, commit.Result(), fetched, err
}

// fail records a build's failure with every reason; the task itself is done (no retry).
func (p *Pipeline) fail(ctx context.Context, b registry.Build, steps []builder.Step, cause error) error {
	_, err := p.Deployments.FinishBuild(context.WithoutCancel(ctx), b.ID, registry.BuildOutcome{Steps: stepsJSON(steps), Error: cause.Error()})
	if err != nil && !errors.Is(err, registry.ErrBuildFinished) {
		return err
	}
	return nil
}

// TaskFailed implements FailureHandler: a build task that gave up (its last attempt failed,
// panicked, timed out or was lost with its worker) marks its build failed with the reason.
func (p *Pipeline) TaskFailed(ctx context.Context, t Task, cause error) {
	var pl buildPayload
	if json.Unmarshal(t.Payload, &pl) != nil {
		return
	}
	_, err := p.Deployments.FinishBuild(ctx, pl.BuildID, registry.BuildOutcome{Steps: "[]", Error: "build gave up: " + cause.Error()})
	if err != nil && !errors.Is(err, registry.ErrBuildFinished) {
		p.logger().ErrorContext(ctx, "record failed build", "build_id", pl.BuildID, "err", err)
	}
}

// Recover enqueues every build still queued: a process that died between recording a build
// and enqueueing it leaves one behind. Dedupe by build ID makes it safe to call at every start.
func (p *Pipeline) Recover(ctx context.Context) (int, error) {
	ids, err := p.Deployments.Queued(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		err := p.Queue.Enqueue(ctx, NewBuildTask(id))
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
