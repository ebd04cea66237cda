package deploy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/agent/agenttest"
	"svc/builder"
	"svc/builder/gittest"
	"svc/deploy"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/registry/fsobjects"
	"svc/webhook"
	"svc/workers"
	"svc/workers/dbqueue"
)

// env is a Deployer with a build handler behind its queue, as svc up wires them.
type env struct {
	deployer *deploy.Deployer
	commits  *workers.CommitCache
	stores   *registry.Stores
	objects  registry.Objects
	queue    workers.Queue
}

// newEnv wires a Deployer on db and a build handler on the in-process queue, running until the
// test ends, as svc up wires them when commits is not nil (both share it), as svc api and svc
// worker do when it is nil (a push stores its commit's tree in the object store).
func newEnv(t *testing.T, db *gorm.DB, commits *workers.CommitCache) *env {
	t.Helper()
	fsObjects, err := fsobjects.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objects := registry.Checked(fsObjects)
	cipher, err := registry.NewCipher([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	stores := registry.NewStores(db, cipher, objects, webhook.NormalizeRepoURL)
	q, err := dbqueue.New(db, dbqueue.Config{PollInterval: 20 * time.Millisecond, RetryBase: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sources, creds := workers.NewRegistrySources(stores), builder.Credentials{Secrets: stores.Secrets}
	mux := workers.NewServeMux()
	mux.Handle(workers.TaskBuild, workers.NewBuildHandler(workers.BuildConfig{
		Deployments: stores.Deployments, Logs: stores.BuildLogs, Objects: objects, Sources: sources, Credentials: creds, Commits: commits,
	}))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := q.Run(ctx, mux); err != nil {
			t.Errorf("queue run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &env{
		deployer: deploy.New(deploy.Config{
			Deployments: stores.Deployments, Queue: q, Sources: sources, Pushes: stores.Pushes, Credentials: creds, Commits: commits,
			Objects: objects,
		}),
		commits: commits, stores: stores, objects: objects, queue: q,
	}
}

// wait polls the deployment until its build finished.
func (e *env) wait(t *testing.T, deployID string) registry.Deployment {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		d, err := e.stores.Deployments.Get(context.Background(), deployID)
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
	lines, err := e.stores.BuildLogs.After(context.Background(), buildID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Line + "\n")
	}
	return b.String()
}

// gitAgent creates an agent whose git source is a new repository holding the example tree
// fixture, with autoDeploy as given, and returns the repository, its first commit and the agent.
func (e *env) gitAgent(t *testing.T, name, fixture string, autoDeploy bool) (*gittest.Repo, string, registry.Agent) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	repo, commit := gittest.Init(t, dir, agenttest.Dir(t, fixture))
	a, err := e.stores.Agents.Create(ctx, name, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.stores.Sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "file://" + dir, DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	if autoDeploy {
		if _, err := e.stores.Settings.Put(ctx, a.ID, registry.SettingsPatch{AutoDeploy: &autoDeploy}); err != nil {
			t.Fatal(err)
		}
	}
	return repo, commit, a
}

func push(branch, commit string) webhook.Push {
	return webhook.Push{Ref: "refs/heads/" + branch, Branch: branch, After: commit}
}

func TestEnvironmentFor(t *testing.T) {
	for _, tt := range []struct{ branch, production, want string }{
		{"main", "main", registry.Production},
		{"feature/x", "main", "preview-feature/x"},
		{"main", "release", "preview-main"},
	} {
		if got := deploy.EnvironmentFor(tt.branch, tt.production); got != tt.want {
			t.Errorf("EnvironmentFor(%q, %q) = %q, want %q", tt.branch, tt.production, got, tt.want)
		}
	}
}

func TestPushBuildsAndActivates(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		e := newEnv(t, db, nil)
		repo, c1, a := e.gitAgent(t, "Support Desk", "support-desk", false)
		dir := repo.Dir

		// autoDeploy off: the push is recorded, nothing built.
		out, err := e.deployer.Push(ctx, a.ID, push("main", c1))
		if err != nil || out.Action != "recorded" || out.Environment != "production" {
			t.Fatalf("push with autoDeploy off = %+v, %v", out, err)
		}
		on := true
		if _, err := e.stores.Settings.Put(ctx, a.ID, registry.SettingsPatch{AutoDeploy: &on}); err != nil {
			t.Fatal(err)
		}

		// A push to a feature branch builds preview-<branch> and activates it.
		repo.Branch(t, "feature/x")
		if err := os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte("feature\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c2 := repo.Commit(t, "", "feature")
		out, err = e.deployer.Push(ctx, a.ID, push("feature/x", c2))
		if err != nil || out.Action != "build" || out.Environment != "preview-feature/x" {
			t.Fatalf("feature push = %+v, %v", out, err)
		}
		// The same push again while it builds, or after: nothing built.
		again, err := e.deployer.Push(ctx, a.ID, push("feature/x", c2))
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
		b, _, err := builder.OpenStored(ctx, e.objects, d.BundleKey)
		if err != nil {
			t.Fatal(err)
		}
		if b.Manifest.Commit != c2 {
			t.Fatalf("manifest commit = %q, want %q", b.Manifest.Commit, c2)
		}
		after, err := e.deployer.Push(ctx, a.ID, push("feature/x", c2))
		if err != nil || after.Action != "skipped" || after.Reason != "already-built" {
			t.Fatalf("push of built commit = %+v, %v", after, err)
		}

		// Production without autoPromoteProduction: ready, not active.
		out, err = e.deployer.Push(ctx, a.ID, push("main", c1))
		if err != nil || out.Action != "build" || out.Environment != "production" {
			t.Fatalf("main push = %+v, %v", out, err)
		}
		if d := e.wait(t, out.DeployID); d.Status != registry.StatusReady || d.IsActive {
			t.Fatalf("production without autoPromote = %+v", d)
		}
		// With autoPromoteProduction: a redeploy of main becomes active.
		if _, err := e.stores.Settings.Put(ctx, a.ID, registry.SettingsPatch{AutoPromoteProduction: &on}); err != nil {
			t.Fatal(err)
		}
		rd, err := e.deployer.Redeploy(ctx, deploy.RedeployRequest{AgentID: a.ID})
		if err != nil || rd.Reused {
			t.Fatalf("redeploy = %+v, %v", rd, err)
		}
		if d := e.wait(t, rd.DeployID); !d.Serving() || d.CommitSHA != c1 {
			t.Fatalf("production with autoPromote = %+v", d)
		}
		// reuseBuild returns the newest good build of the same commit.
		reused, err := e.deployer.Redeploy(ctx, deploy.RedeployRequest{AgentID: a.ID, ReuseBuild: true})
		if err != nil || !reused.Reused || reused.DeployID != rd.DeployID {
			t.Fatalf("reuseBuild redeploy = %+v, %v", reused, err)
		}
		// ci.deploy.branches of support-desk allow main, release/* and feature/*: others are filtered.
		repo.Branch(t, "chore")
		c3 := repo.Commit(t, "", "chore")
		out, err = e.deployer.Push(ctx, a.ID, push("chore", c3))
		if err != nil || out.Action != "skipped" || out.Reason != "branch-filtered" {
			t.Fatalf("filtered push = %+v, %v", out, err)
		}
		// Tags and deletions are skipped.
		if out, _ := e.deployer.Push(ctx, a.ID, webhook.Push{Ref: "refs/tags/v1", Tag: "v1", After: c1}); out.Action != "skipped" {
			t.Fatalf("tag push = %+v", out)
		}
		if out, _ := e.deployer.Push(ctx, a.ID, webhook.Push{Ref: "refs/heads/old", Branch: "old", Deleted: true}); out.Action != "skipped" {
			t.Fatalf("delete push = %+v", out)
		}
	})
}

// TestPushHandsItsCommitToTheBuild: with a CommitCache (svc up), the commit fetched for the
// branch check of a push is the one its build builds; the commit is fetched once.
func TestPushHandsItsCommitToTheBuild(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		e := newEnv(t, db, workers.NewCommitCache(4, time.Minute))
		repo, _, a := e.gitAgent(t, "Support Desk", "support-desk", true)
		repo.Branch(t, "feature/x")
		c := repo.Commit(t, "", "feature")
		out, err := e.deployer.Push(ctx, a.ID, push("feature/x", c))
		if err != nil || out.Action != "build" {
			t.Fatalf("push = %+v, %v", out, err)
		}
		d := e.wait(t, out.DeployID)
		log := e.logText(t, out.BuildID)
		if !d.Serving() || d.CommitSHA != c || !strings.Contains(log, "was fetched by the push's branch check") {
			t.Fatalf("deployment %+v\nlog:\n%s", d, log)
		}
		if b, _, err := builder.OpenStored(ctx, e.objects, d.BundleKey); err != nil || b.Manifest.Commit != c {
			t.Fatalf("bundle of %q: %v", c, err)
		}
		if n := e.commits.Len(); n != 0 {
			t.Errorf("%d commits left after the build took its own", n)
		}
		// A push of a commit already built builds nothing and leaves no commit behind.
		if again, err := e.deployer.Push(ctx, a.ID, push("feature/x", c)); err != nil || again.Action != "skipped" {
			t.Fatalf("push again = %+v, %v", again, err)
		}
		if n := e.commits.Len(); n != 0 {
			t.Errorf("%d commits kept for a push that built nothing", n)
		}
	})
}

// TestPushStoresItsTreeForTheBuild: without a CommitCache (svc api, the builds on workers), a
// push stores the tree of the commit its branch check fetched in the object store, and its build
// reads it there, builds the bundle a redeploy of that commit builds by fetching, and deletes it.
// A push that builds nothing stores nothing.
func TestPushStoresItsTreeForTheBuild(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		e := newEnv(t, db, nil)
		repo, _, a := e.gitAgent(t, "Support Desk", "support-desk", true)
		repo.Branch(t, "feature/x")
		c := repo.Commit(t, "", "feature")
		key := registry.CommitSourceKey(a.ID, c)
		out, err := e.deployer.Push(ctx, a.ID, push("feature/x", c))
		if err != nil || out.Action != "build" {
			t.Fatalf("push = %+v, %v", out, err)
		}
		d := e.wait(t, out.DeployID)
		log := e.logText(t, out.BuildID)
		if !d.Serving() || d.CommitSHA != c || !strings.Contains(log, "that the push fetched and stored") {
			t.Fatalf("deployment %+v\nlog:\n%s", d, log)
		}
		// The build task deletes the tree just after the deployment turns ready: wait for it
		// (bounded; this asserts nothing about speed).
		_, err = e.objects.Stat(ctx, key)
		for deadline := time.Now().Add(time.Minute); !errors.Is(err, registry.ErrNotFound) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			_, err = e.objects.Stat(ctx, key)
		}
		if !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("the stored tree after the build: %v, want it deleted", err)
		}
		rd, err := e.deployer.Redeploy(ctx, deploy.RedeployRequest{AgentID: a.ID, Branch: "feature/x", Environment: "preview-fetched"})
		if err != nil {
			t.Fatal(err)
		}
		fetched := e.wait(t, rd.DeployID)
		if log := e.logText(t, rd.BuildID); fetched.Status != registry.StatusReady || !strings.Contains(log, "fetched commit") {
			t.Fatalf("redeploy %+v\nlog:\n%s", fetched, log)
		}
		if fetched.Digest != d.Digest || fetched.BundleKey != d.BundleKey {
			t.Errorf("bundle of the fetched commit %s %s, of the stored tree %s %s", fetched.BundleKey, fetched.Digest, d.BundleKey, d.Digest)
		}
		// A push of a commit already built builds nothing and stores nothing.
		if again, err := e.deployer.Push(ctx, a.ID, push("feature/x", c)); err != nil || again.Action != "skipped" {
			t.Fatalf("push again = %+v, %v", again, err)
		}
		if _, err := e.objects.Stat(ctx, key); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a push that built nothing stored its tree: %v", err)
		}
	})
}

// TestRedeployRefusals: what a redeploy refuses, with the error callers branch on.
func TestRedeployRefusals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, dbtest.SQLite(t), nil)
	_, _, git := e.gitAgent(t, "hello", "hello", false)
	hosted, err := e.stores.Agents.Create(ctx, "uploads", "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  deploy.RedeployRequest
		want error
		msg  string
	}{
		{"missing branch", deploy.RedeployRequest{AgentID: git.ID, Branch: "nope"}, deploy.ErrBranchAbsent, `"nope"`},
		{"source version of a git source", deploy.RedeployRequest{AgentID: git.ID, SourceVersionID: "v1"}, deploy.ErrBadRedeploy, "hosted sources only"},
		{"branch of a hosted source", deploy.RedeployRequest{AgentID: hosted.ID, Branch: "main"}, deploy.ErrBadRedeploy, "git sources only"},
		{"nothing uploaded", deploy.RedeployRequest{AgentID: hosted.ID}, deploy.ErrNoSource, "no source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.deployer.Redeploy(ctx, tt.req)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Redeploy = %v, want %v saying %q", err, tt.want, tt.msg)
			}
		})
	}
}
