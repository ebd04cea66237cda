package workers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	"svc/workers"
	"svc/workers/dbqueue"
)

type env struct {
	db       *gorm.DB
	queue    workers.Queue
	deps     *registry.Deployments
	logs     *registry.BuildLogs
	agents   *registry.Agents
	sources  *registry.Sources
	settings *registry.Settings
	objects  registry.Objects
}

// newEnv runs a build handler on db with the in-process queue until the test ends; with, when
// given, changes the handler's config first.
func newEnv(t *testing.T, db *gorm.DB, with ...func(*workers.BuildConfig)) *env {
	t.Helper()
	objects, err := fsobjects.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := buildConfig(db, registry.Checked(objects))
	stores := storesOf(db, cfg.Objects)
	e := &env{
		db: db, objects: cfg.Objects, deps: cfg.Deployments, logs: cfg.Logs,
		agents: stores.Agents, sources: stores.Sources, settings: stores.Settings,
	}
	for _, f := range with {
		f(&cfg)
	}
	q, err := dbqueue.New(db, dbqueue.Config{PollInterval: 20 * time.Millisecond, RetryBase: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.queue = q
	mux := workers.NewServeMux()
	mux.Handle(workers.TaskBuild, workers.NewBuildHandler(cfg))
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

// build records a build of commit on branch into environment, as a push or redeploy does, and
// enqueues it.
func (e *env) build(t *testing.T, agentID, environment, branch, commit string) registry.BuildStart {
	t.Helper()
	st, err := e.deps.StartBuild(context.Background(), registry.BuildRequest{
		AgentID: agentID, Environment: environment, Branch: branch, Commit: commit, Trigger: "redeploy",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.queue.Enqueue(context.Background(), workers.NewBuildTask(context.Background(), st.Build.ID)); err != nil {
		t.Fatal(err)
	}
	return st
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
	st := e.build(t, a.ID, registry.Production, "main", c1)
	d := e.wait(t, st.Deployment.ID)
	if d.Status != registry.StatusFailed || d.BundleKey != "" {
		t.Fatalf("broken deployment = %+v", d)
	}
	b, err := e.deps.GetBuild(ctx, st.Build.ID)
	if err != nil {
		t.Fatal(err)
	}
	log := e.logText(t, st.Build.ID)
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
	n, err := workers.RecoverBuilds(ctx, e.queue, e.deps)
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1", n, err)
	}
	if d := e.wait(t, st.Deployment.ID); !d.Serving() {
		t.Fatalf("recovered build's deployment = %+v", d)
	}
	if n, err := workers.RecoverBuilds(ctx, e.queue, e.deps); err != nil || n != 0 {
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
	st := e.build(t, a.ID, registry.Production, "main", missing)
	d := e.wait(t, st.Deployment.ID)
	b, err := e.deps.GetBuild(ctx, st.Build.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != registry.StatusFailed || b.Attempts != 1 || !strings.Contains(b.Error, missing) {
		t.Fatalf("deployment %s, build attempts %d, error %q: want failed on the first attempt, naming the commit", d.Status, b.Attempts, b.Error)
	}
	if log := e.logText(t, st.Build.ID); strings.Contains(log, "tries again") {
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
	e := newEnv(t, db, func(c *workers.BuildConfig) { c.Objects = &failingOnce{Objects: c.Objects} })
	_, commit, a := e.gitAgent(t, "hello", "hello", false)
	st := e.build(t, a.ID, registry.Production, "main", commit)
	d := e.wait(t, st.Deployment.ID)
	b, err := e.deps.GetBuild(ctx, st.Build.ID)
	if err != nil {
		t.Fatal(err)
	}
	log := e.logText(t, st.Build.ID)
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
			e := newEnv(t, dbtest.SQLite(t), func(c *workers.BuildConfig) { c.Objects = brokenObjects{Objects: c.Objects, panics: tt.panics} })
			_, commit, a := e.gitAgent(t, "hello", "hello", false)
			st := e.build(t, a.ID, registry.Production, "main", commit)
			d := e.wait(t, st.Deployment.ID)
			b, err := e.deps.GetBuild(ctx, st.Build.ID)
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

// A git commit whose tree has evals gets a pending svc/evals status before its deployment is
// ready, so the promotion gate is closed from the start even when nothing queues the evals
// afterwards (no OnReady here: the process died, say); a commit without evals gets none.
func TestBuildHoldsTheGateForEvals(t *testing.T) {
	db := dbtest.SQLite(t)
	var statuses *registry.CommitStatuses
	e := newEnv(t, db, func(c *workers.BuildConfig) {
		statuses = storesOf(db, c.Objects).CommitStatuses
		c.Statuses = statuses
	})
	for fixture, wantBlocked := range map[string]bool{"support-desk": true, "hello": false} {
		_, commit, a := e.gitAgent(t, fixture, fixture, false)
		st := e.build(t, a.ID, "preview-main", "main", commit)
		if d := e.wait(t, st.Deployment.ID); d.Status != registry.StatusReady {
			t.Fatalf("%s: deployment %+v", fixture, d)
		}
		blocked, state, err := statuses.Blocks(context.Background(), a.ID, commit)
		if err != nil || blocked != wantBlocked || (wantBlocked && state != string(registry.StatePending)) {
			t.Errorf("%s: blocked %v (%s), %v; want %v", fixture, blocked, state, err, wantBlocked)
		}
	}
}

// A build that finishes after a build of the same environment requested later leaves the newer
// deployment serving (issue 16), and its log says why it was not activated. The builds run one
// after the other, newer first, by calling the handler directly.
func TestOlderBuildFinishingLastIsNotActivated(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		_, commit, a := e.gitAgent(t, "hello", "hello", false)
		h := workers.NewBuildHandler(buildConfig(db, e.objects))
		var sts []registry.BuildStart
		for range 2 {
			st, err := e.deps.StartBuild(ctx, registry.BuildRequest{AgentID: a.ID, Environment: "preview-x", Branch: "main", Commit: commit, Trigger: "redeploy"})
			if err != nil {
				t.Fatal(err)
			}
			sts = append(sts, st)
		}
		older, newer := sts[0], sts[1]
		for _, st := range []registry.BuildStart{newer, older} {
			if err := h.ProcessTask(ctx, workers.NewBuildTask(ctx, st.Build.ID)); err != nil {
				t.Fatal(err)
			}
		}
		if d, err := e.deps.Get(ctx, older.Deployment.ID); err != nil || d.Status != registry.StatusReady || d.IsActive {
			t.Fatalf("older = %+v, %v; want ready and inactive", d, err)
		}
		if d, err := e.deps.Active(ctx, a.ID, "preview-x"); err != nil || d.ID != newer.Deployment.ID {
			t.Fatalf("active = %+v, %v; want %s", d, err, newer.Deployment.ID)
		}
		want := "deployment " + older.Deployment.ID + " ready; not activated: deployment " + newer.Deployment.ID + ", requested later, is newer (ready)"
		if log := e.logText(t, older.Build.ID); !strings.Contains(log, want) {
			t.Errorf("older build's log lacks %q:\n%s", want, log)
		}
		if log := e.logText(t, newer.Build.ID); !strings.HasSuffix(log, "deployment "+newer.Deployment.ID+" ready and active in preview-x\n") {
			t.Errorf("newer build's log:\n%s", log)
		}
	})
}

// A push that stored its commit's tree (deploy, builder.StoreCommit) names it in its build task:
// the build reads it instead of fetching, builds the same bundle as a build that fetched, and
// deletes it when it finishes. A stored tree that is missing or unreadable is logged and the
// commit fetched; a task that names another commit's tree does not read it. A push's build whose
// task names no tree (queued again by RecoverBuilds) reads and deletes the one at its commit's
// key, if any, and otherwise fetches without a word about it.
func TestBuildReadsTheTreeThePushStored(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	e := newEnv(t, db)
	root := t.TempDir()
	repo, first := gittest.Init(t, filepath.Join(root, "repo"), agenttest.Dir(t, "hello"))
	var fetches atomic.Int64
	srv := gittest.HTTPServer(t, root, func(backend http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				fetches.Add(1)
			}
			backend.ServeHTTP(w, r)
		})
	})
	a, err := e.agents.Create(ctx, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: srv.URL + "/repo", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	// The build of the first commit that fetched it: the bundle every other build must match.
	fetched := e.wait(t, e.build(t, a.ID, "preview-fetched", "main", first).Deployment.ID)
	if fetched.Status != registry.StatusReady {
		t.Fatalf("fetched build: %+v", fetched)
	}
	second := repo.Commit(t, "", "second")
	// store stores commit's tree as a push does and returns its key.
	store := func(commit string) string {
		t.Helper()
		c, err := builder.FetchCommit(ctx, builder.GitSource{URL: srv.URL + "/repo", Branch: "main", Commit: commit}, builder.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		key := registry.CommitSourceKey(a.ID, commit)
		if _, err := builder.StoreCommit(ctx, e.objects, key, c); err != nil {
			t.Fatal(err)
		}
		return key
	}
	tests := []struct {
		name      string
		commit    string
		key       func() string // the key the task names, after storing what the case stores
		unnamed   bool          // the task names no key (NewBuildTask)
		wantFetch bool
		wantLog   string
	}{
		{"stored", first, func() string { return store(first) }, false, false, "read the tree of commit " + first[:12] + " on main that the push fetched and stored"},
		{"missing", first, func() string { return registry.CommitSourceKey(a.ID, first) }, false, true, "the tree the push stored cannot be read"},
		{"unreadable", first, func() string {
			key := registry.CommitSourceKey(a.ID, first)
			if err := e.objects.Put(ctx, key, strings.NewReader("not a tar.gz"), -1); err != nil {
				t.Fatal(err)
			}
			return key
		}, false, true, "the tree the push stored cannot be read"},
		{"another commit's", first, func() string { return store(second) }, false, true, "fetched commit " + first[:12]},
		{"unnamed, stored", first, func() string { return store(first) }, true, false, "that the push fetched and stored"},
		{"unnamed, none", first, func() string { return registry.CommitSourceKey(a.ID, first) }, true, true, "fetched commit " + first[:12]},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key()
			before := fetches.Load()
			st, err := e.deps.StartBuild(ctx, registry.BuildRequest{
				AgentID: a.ID, Environment: fmt.Sprint("preview-", i), Branch: "main", Commit: tt.commit, Trigger: "push",
			})
			if err != nil {
				t.Fatal(err)
			}
			task := workers.NewPushBuildTask(ctx, st.Build.ID, key)
			if tt.unnamed {
				task = workers.NewBuildTask(ctx, st.Build.ID)
			}
			if err := e.queue.Enqueue(ctx, task); err != nil {
				t.Fatal(err)
			}
			d := e.wait(t, st.Deployment.ID)
			log := e.logText(t, st.Build.ID)
			if d.Status != registry.StatusReady || !strings.Contains(log, tt.wantLog) || (tt.unnamed && strings.Contains(log, "cannot be read")) {
				t.Fatalf("deployment %+v, want ready with %q in its log:\n%s", d, tt.wantLog, log)
			}
			if d.Digest != fetched.Digest || d.BundleKey != fetched.BundleKey {
				t.Errorf("bundle %s %s, want the fetched build's %s %s", d.BundleKey, d.Digest, fetched.BundleKey, fetched.Digest)
			}
			if n := fetches.Load() - before; (n > 0) != tt.wantFetch {
				t.Errorf("%d requests for a pack; want a fetch: %v", n, tt.wantFetch)
			}
			// The task deletes the tree once the build is done, just after the deployment
			// turns ready.
			waitFor(t, "the build to delete the stored tree "+key, func() bool {
				_, err := e.objects.Stat(ctx, key)
				return errors.Is(err, registry.ErrNotFound)
			})
		})
	}
}

// TestBuildRecordsUnsetReferencesAsWarnings: a build of an agent whose env: references are not
// all set succeeds and is activated, with a warning for each unset one in its log and on the
// build record; references are resolved as a runtime resolves them (the agent's secrets, then
// the environment).
func TestBuildRecordsUnsetReferencesAsWarnings(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	e := newEnv(t, db, func(cfg *workers.BuildConfig) {
		cfg.Credentials.Getenv = func(name string) (string, bool) {
			if name == "STATUS_API_URL" {
				return "https://status.example.com", true
			}
			return "", false
		}
	})
	dir := t.TempDir()
	_, c1 := gittest.Init(t, dir, agenttest.Dir(t, "support-desk"))
	a, err := e.agents.Create(ctx, "desk", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "file://" + dir}); err != nil {
		t.Fatal(err)
	}
	if err := storesOf(db, e.objects).Secrets.Put(ctx, a.ID, "SUPPORT_DB_URL", "sqlite:/tmp/x.db"); err != nil {
		t.Fatal(err)
	}
	st := e.build(t, a.ID, "preview", "main", c1)
	if d := e.wait(t, st.Deployment.ID); d.Status != registry.StatusReady || !d.IsActive {
		t.Fatalf("deployment = %s (active %v), want ready and active: %s\n%s", d.Status, d.IsActive, d.Error, e.logText(t, st.Build.ID))
	}
	b, err := e.deps.GetBuild(ctx, st.Build.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "env:STATUS_API_TOKEN (svc/connections/status/spec.json auth.headers.Authorization) is not set: connection status will fail until it is; " +
		"set it with `svc secrets set desk STATUS_API_TOKEN` or in the runner's environment"
	if b.Warnings != fmt.Sprintf("[%q]", want) {
		t.Errorf("build warnings = %s, want [%q]", b.Warnings, want)
	}
	if log := e.logText(t, st.Build.ID); !strings.Contains(log, "warning: "+want+"\n") || strings.Contains(log, "SUPPORT_DB_URL") {
		t.Errorf("build log lacks the warning, or warns about a set secret:\n%s", log)
	}
}
