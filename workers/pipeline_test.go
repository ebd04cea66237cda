package workers_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/agent/agenttest"
	"svc/builder"
	"svc/builder/gittest"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/registry/fsobjects"
	"svc/webhook"
	"svc/workers"
	"svc/workers/dbqueue"
)

type env struct {
	db       *gorm.DB
	pipeline *workers.Pipeline
	deps     *registry.Deployments
	logs     *registry.BuildLogs
	agents   *registry.Agents
	sources  *registry.Sources
	settings *registry.Settings
	objects  registry.Objects
}

// newEnv wires a pipeline on db with the in-process queue running until the test ends.
func newEnv(t *testing.T, db *gorm.DB) *env {
	t.Helper()
	objects, err := fsobjects.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, objects: registry.Checked(objects)}
	e.pipeline = pipelineOn(db, e.objects)
	src := e.pipeline.Sources.(*workers.RegistrySources)
	e.deps, e.logs, e.agents, e.sources, e.settings = e.pipeline.Deployments, e.pipeline.Logs, src.Agents, src.Sources, src.Settings
	q, err := dbqueue.New(db, dbqueue.Config{PollInterval: 20 * time.Millisecond, RetryBase: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.pipeline.Queue = q
	mux := workers.NewServeMux()
	mux.Handle(workers.TaskBuild, e.pipeline)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := q.Run(ctx, mux); err != nil {
			t.Errorf("queue run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return e
}

// wait polls the deployment until its build finished.
func (e *env) wait(t *testing.T, deployID string) registry.Deployment {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		d, err := e.deps.Get(context.Background(), deployID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status == registry.StatusReady || d.Status == registry.StatusFailed {
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("deployment %s did not finish", deployID)
	return registry.Deployment{}
}

func (e *env) logText(t *testing.T, buildID string) string {
	t.Helper()
	lines, err := e.logs.After(context.Background(), buildID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Line + "\n")
	}
	return b.String()
}

func push(branch, commit string) webhook.Push {
	return webhook.Push{Ref: "refs/heads/" + branch, Branch: branch, After: commit}
}

func TestPushBuildsAndActivates(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		dir := t.TempDir()
		repo, c1 := gittest.Init(t, dir, agenttest.Dir(t, "support-desk"))
		a, err := e.agents.Create(ctx, "Support Desk", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "file://" + dir, DefaultBranch: "main"}); err != nil {
			t.Fatal(err)
		}

		// autoDeploy off: the push is recorded, nothing built.
		out, err := e.pipeline.Push(ctx, a.ID, push("main", c1))
		if err != nil || out.Action != "recorded" || out.Environment != "production" {
			t.Fatalf("push with autoDeploy off = %+v, %v", out, err)
		}
		on := true
		if _, err := e.settings.Put(ctx, a.ID, registry.SettingsPatch{AutoDeploy: &on}); err != nil {
			t.Fatal(err)
		}

		// A push to a feature branch builds preview-<branch> and activates it.
		repo.Branch(t, "feature/x")
		if err := os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte("feature\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c2 := repo.Commit(t, "", "feature")
		out, err = e.pipeline.Push(ctx, a.ID, push("feature/x", c2))
		if err != nil || out.Action != "build" || out.Environment != "preview-feature/x" {
			t.Fatalf("feature push = %+v, %v", out, err)
		}
		// The same push again while it builds, or after: nothing built.
		again, err := e.pipeline.Push(ctx, a.ID, push("feature/x", c2))
		if err != nil || again.Action != "skipped" || again.BuildID != out.BuildID {
			t.Fatalf("duplicate push = %+v, %v", again, err)
		}
		d := e.wait(t, out.DeployID)
		if !d.Serving() || d.BundleKey == "" || d.CommitSHA != c2 {
			t.Fatalf("preview deployment = %+v\nlog:\n%s", d, e.logText(t, out.BuildID))
		}
		if _, err := e.objects.Stat(ctx, d.BundleKey); err != nil {
			t.Fatalf("bundle: %v", err)
		}
		b, err := builder.OpenBundle(ctx, e.objects, d.BundleKey)
		if err != nil {
			t.Fatal(err)
		}
		if b.Manifest.Commit != c2 {
			t.Fatalf("manifest commit = %q, want %q", b.Manifest.Commit, c2)
		}
		after, err := e.pipeline.Push(ctx, a.ID, push("feature/x", c2))
		if err != nil || after.Action != "skipped" || after.Reason != "already-built" {
			t.Fatalf("push of built commit = %+v, %v", after, err)
		}

		// Production without autoPromoteProduction: ready, not active.
		out, err = e.pipeline.Push(ctx, a.ID, push("main", c1))
		if err != nil || out.Action != "build" || out.Environment != "production" {
			t.Fatalf("main push = %+v, %v", out, err)
		}
		if d := e.wait(t, out.DeployID); d.Status != registry.StatusReady || d.IsActive {
			t.Fatalf("production without autoPromote = %+v", d)
		}
		// With autoPromoteProduction: a redeploy of main becomes active.
		if _, err := e.settings.Put(ctx, a.ID, registry.SettingsPatch{AutoPromoteProduction: &on}); err != nil {
			t.Fatal(err)
		}
		rd, err := e.pipeline.Redeploy(ctx, workers.RedeployRequest{AgentID: a.ID})
		if err != nil || rd.Reused {
			t.Fatalf("redeploy = %+v, %v", rd, err)
		}
		if d := e.wait(t, rd.DeployID); !d.Serving() || d.CommitSHA != c1 {
			t.Fatalf("production with autoPromote = %+v", d)
		}
		// reuseBuild returns the newest good build of the same commit.
		reused, err := e.pipeline.Redeploy(ctx, workers.RedeployRequest{AgentID: a.ID, ReuseBuild: true})
		if err != nil || !reused.Reused || reused.DeployID != rd.DeployID {
			t.Fatalf("reuseBuild redeploy = %+v, %v", reused, err)
		}
		// ci.deploy.branches of support-desk allow main, release/* and feature/*: others are filtered.
		repo.Branch(t, "chore")
		c3 := repo.Commit(t, "", "chore")
		out, err = e.pipeline.Push(ctx, a.ID, push("chore", c3))
		if err != nil || out.Action != "skipped" || out.Reason != "branch-filtered" {
			t.Fatalf("filtered push = %+v, %v", out, err)
		}
		// Tags and deletions are skipped.
		if out, _ := e.pipeline.Push(ctx, a.ID, webhook.Push{Ref: "refs/tags/v1", Tag: "v1", After: c1}); out.Action != "skipped" {
			t.Fatalf("tag push = %+v", out)
		}
		if out, _ := e.pipeline.Push(ctx, a.ID, webhook.Push{Ref: "refs/heads/old", Branch: "old", Deleted: true}); out.Action != "skipped" {
			t.Fatalf("delete push = %+v", out)
		}
	})
}

// TestPushHandsItsCommitToTheBuild: with a CommitCache (svc up), the commit fetched for the
// branch check of a push is the one its build builds; the commit is fetched once.
func TestPushHandsItsCommitToTheBuild(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		e.pipeline.Commits = workers.NewCommitCache(4, time.Minute)
		repo, _, a := e.gitAgent(t, "Support Desk", "support-desk", true)
		repo.Branch(t, "feature/x")
		c := repo.Commit(t, "", "feature")
		out, err := e.pipeline.Push(ctx, a.ID, push("feature/x", c))
		if err != nil || out.Action != "build" {
			t.Fatalf("push = %+v, %v", out, err)
		}
		d := e.wait(t, out.DeployID)
		log := e.logText(t, out.BuildID)
		if !d.Serving() || d.CommitSHA != c || !strings.Contains(log, "was fetched by the push's branch check") {
			t.Fatalf("deployment %+v\nlog:\n%s", d, log)
		}
		if b, err := builder.OpenBundle(ctx, e.objects, d.BundleKey); err != nil || b.Manifest.Commit != c {
			t.Fatalf("bundle of %q: %v", c, err)
		}
		if n := e.pipeline.Commits.Len(); n != 0 {
			t.Errorf("%d commits left after the build took its own", n)
		}
		// A push of a commit already built builds nothing and leaves no commit behind.
		if again, err := e.pipeline.Push(ctx, a.ID, push("feature/x", c)); err != nil || again.Action != "skipped" {
			t.Fatalf("push again = %+v, %v", again, err)
		}
		if n := e.pipeline.Commits.Len(); n != 0 {
			t.Errorf("%d commits kept for a push that built nothing", n)
		}
	})
}

func TestBrokenBuildFailsWithEveryProblem(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	e := newEnv(t, db)
	dir := t.TempDir()
	_, c1 := gittest.Init(t, dir, agenttest.Dir(t, "broken"))
	a, err := e.agents.Create(ctx, "broken", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "file://" + dir}); err != nil {
		t.Fatal(err)
	}
	rd, err := e.pipeline.Redeploy(ctx, workers.RedeployRequest{AgentID: a.ID, Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	d := e.wait(t, rd.DeployID)
	if d.Status != registry.StatusFailed || d.BundleKey != "" {
		t.Fatalf("broken deployment = %+v", d)
	}
	b, err := e.deps.GetBuild(ctx, rd.BuildID)
	if err != nil {
		t.Fatal(err)
	}
	log := e.logText(t, rd.BuildID)
	for _, want := range []string{
		"svc.json", "colour", "version", "no_such_tool", "missing-skill", "nope", "ghost",
		"svc/skills/x/SKILL.md", "undeclared_child", "nobody", "svc/tools/bad/handler.ts:2",
	} {
		if !strings.Contains(log, want) || !strings.Contains(b.Error, want) {
			t.Errorf("build log and error must name %q\nlog:\n%s\nerror: %s", want, log, b.Error)
		}
	}
	if b.CommitSHA != c1 || b.Status != registry.BuildFailed {
		t.Errorf("build = %+v", b)
	}
	list, err := e.objects.List(ctx, "bundles/")
	if err != nil || len(list) != 0 {
		t.Errorf("a failed build left bundles: %v, %v", list, err)
	}
	if _, err := e.pipeline.Redeploy(ctx, workers.RedeployRequest{AgentID: a.ID, Branch: "nope"}); !errors.Is(err, workers.ErrBranchAbsent) {
		t.Errorf("redeploy of a missing branch: %v", err)
	}
}

func TestRecoverEnqueuesOrphanedBuilds(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	e := newEnv(t, db)
	dir := t.TempDir()
	_, c1 := gittest.Init(t, dir, agenttest.Dir(t, "hello"))
	a, err := e.agents.Create(ctx, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "file://" + dir}); err != nil {
		t.Fatal(err)
	}
	// A build recorded by a process that died before enqueueing it.
	st, err := e.deps.StartBuild(ctx, registry.BuildRequest{AgentID: a.ID, Environment: "preview-main", Branch: "main", Commit: c1})
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.pipeline.Recover(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1", n, err)
	}
	if d := e.wait(t, st.Deployment.ID); !d.Serving() {
		t.Fatalf("recovered build's deployment = %+v", d)
	}
	if n, err := e.pipeline.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("second Recover = %d, %v; want 0", n, err)
	}
}

// TestFatalBuildErrorsFailAtOnce: a pushed commit that is not on its branch fails on its first
// attempt with the reason, instead of being retried; an error that may pass is retried, and the
// build log says so before the next attempt.
func TestFatalBuildErrorsFailAtOnce(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	e := newEnv(t, db)
	_, _, a := e.gitAgent(t, "hello", "hello", true)
	missing := strings.Repeat("ab", 20)
	out, err := e.pipeline.Push(ctx, a.ID, push("main", missing))
	if err != nil || out.Action != "build" {
		t.Fatalf("push = %+v, %v", out, err)
	}
	d := e.wait(t, out.DeployID)
	b, err := e.deps.GetBuild(ctx, out.BuildID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != registry.StatusFailed || b.Attempts != 1 || !strings.Contains(b.Error, missing) {
		t.Fatalf("deployment %s, build attempts %d, error %q: want failed on the first attempt, naming the commit", d.Status, b.Attempts, b.Error)
	}
	if log := e.logText(t, out.BuildID); strings.Contains(log, "tries again") {
		t.Errorf("a fatal error was retried:\n%s", log)
	}
}

// failingOnce is an object store whose first Put fails, as a store that is briefly unreachable.
type failingOnce struct {
	registry.Objects
	failed atomic.Bool
}

func (f *failingOnce) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if f.failed.CompareAndSwap(false, true) {
		return errors.New("object store unreachable")
	}
	return f.Objects.Put(ctx, key, r, size)
}

// TestPassingBuildErrorsAreRetried: an object store that fails once makes the attempt fail and
// the queue retry it; the log says the attempt failed (not that it was interrupted) and the
// second attempt builds.
func TestPassingBuildErrorsAreRetried(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	e := newEnv(t, db)
	e.pipeline.Objects = &failingOnce{Objects: e.objects}
	_, _, a := e.gitAgent(t, "hello", "hello", false)
	rd, err := e.pipeline.Redeploy(ctx, workers.RedeployRequest{AgentID: a.ID, Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	d := e.wait(t, rd.DeployID)
	b, err := e.deps.GetBuild(ctx, rd.BuildID)
	if err != nil {
		t.Fatal(err)
	}
	log := e.logText(t, rd.BuildID)
	if d.Status != registry.StatusReady || b.Attempts != 2 {
		t.Fatalf("deployment %s after %d attempts, want ready after 2:\n%s", d.Status, b.Attempts, log)
	}
	if !strings.Contains(log, "attempt 1 failed: upload bundle") || !strings.Contains(log, "object store unreachable; the queue tries again") {
		t.Errorf("the log does not say attempt 1 failed and is retried:\n%s", log)
	}
	if strings.Contains(log, "interrupted") {
		t.Errorf("a failed attempt is reported as interrupted:\n%s", log)
	}
}

// brokenObjects is an object store whose every Put fails, or panics when panics is set.
type brokenObjects struct {
	registry.Objects
	panics bool
}

func (b brokenObjects) Put(context.Context, string, io.Reader, int64) error {
	if b.panics {
		panic("object store driver bug")
	}
	return errors.New("object store unreachable")
}

// TestBuildThatNeverSucceedsEndsFailed: a build whose every attempt fails for a reason that may
// pass, or panics, is retried until its task gives up, then ends failed with the last reason
// (told to the build handler by the queue, since the handler's last attempt cannot be sure it is
// the last).
func TestBuildThatNeverSucceedsEndsFailed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		panics bool
		want   string
	}{
		{"error", false, "object store unreachable"},
		{"panic", true, "object store driver bug"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, dbtest.SQLite(t))
			e.pipeline.Objects = brokenObjects{Objects: e.objects, panics: tt.panics}
			_, _, a := e.gitAgent(t, "hello", "hello", false)
			rd, err := e.pipeline.Redeploy(ctx, workers.RedeployRequest{AgentID: a.ID, Branch: "main"})
			if err != nil {
				t.Fatal(err)
			}
			d := e.wait(t, rd.DeployID)
			b, err := e.deps.GetBuild(ctx, rd.BuildID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != registry.StatusFailed || b.Status != registry.BuildFailed || b.Attempts != workers.DefaultMaxRetry+1 {
				t.Fatalf("deployment %s, build %s after %d attempts: want failed after %d", d.Status, b.Status, b.Attempts, workers.DefaultMaxRetry+1)
			}
			if !strings.Contains(b.Error, "build gave up") || !strings.Contains(b.Error, tt.want) {
				t.Errorf("build error = %q, want it to say the build gave up, with %q", b.Error, tt.want)
			}
		})
	}
}

// gitAgent creates an agent whose git source is a new repository holding the example tree
// fixture, with autoDeploy as given, and returns the repository, its first commit and the agent.
func (e *env) gitAgent(t *testing.T, name, fixture string, autoDeploy bool) (*gittest.Repo, string, registry.Agent) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	repo, commit := gittest.Init(t, dir, agenttest.Dir(t, fixture))
	a, err := e.agents.Create(ctx, name, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "file://" + dir, DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	if autoDeploy {
		if _, err := e.settings.Put(ctx, a.ID, registry.SettingsPatch{AutoDeploy: &autoDeploy}); err != nil {
			t.Fatal(err)
		}
	}
	return repo, commit, a
}
