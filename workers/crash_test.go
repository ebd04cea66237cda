package workers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/agent/agenttest"
	"svc/builder"
	"svc/builder/gittest"
	"svc/migrations"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/registry/fsobjects"
	"svc/webhook"
	"svc/workers"
	"svc/workers/asynqqueue"
	"svc/workers/dbqueue"
)

// The crash child: a worker process that picks up the build and is killed in the middle of it.
const (
	envCrashChild   = "SVC_TEST_CRASH_CHILD"
	envCrashDB      = "SVC_TEST_CRASH_DB"
	envCrashObjects = "SVC_TEST_CRASH_OBJECTS"
	// envCrashQueue, when set, is the asynq queue (on the test Redis) both workers use instead
	// of the database queue.
	envCrashQueue = "SVC_TEST_CRASH_QUEUE"
)

// TestMain lets the test binary act as the crashing worker process.
func TestMain(m *testing.M) {
	if os.Getenv(envCrashChild) == "1" {
		crashChild()
		return
	}
	os.Exit(m.Run())
}

func crashChild() {
	ctx := context.Background()
	db, err := migrations.Open(ctx, os.Getenv(envCrashDB))
	if err != nil {
		panic(err)
	}
	objects, err := fsobjects.New(os.Getenv(envCrashObjects))
	if err != nil {
		panic(err)
	}
	var q workers.Queue
	if name := os.Getenv(envCrashQueue); name != "" {
		aq, err := asynqqueue.New(redisCrashConfig(name))
		if err != nil {
			panic(err)
		}
		q = aq
	} else if q, err = dbqueue.New(db, dbqueue.Config{PollInterval: 10 * time.Millisecond, Lease: time.Second}); err != nil {
		panic(err)
	}
	mux := workers.NewServeMux()
	mux.Handle(workers.TaskBuild, workers.NewBuildHandler(buildConfig(db, registry.Checked(objects))))
	_ = q.Run(ctx, mux) // runs until the parent kills this process
}

// storesOf is every registry store on db and objects.
func storesOf(db *gorm.DB, objects registry.Objects) *registry.Stores {
	cipher, err := registry.NewCipher([]byte(strings.Repeat("k", 32)))
	if err != nil {
		panic(err)
	}
	return registry.NewStores(db, cipher, objects, webhook.NormalizeRepoURL)
}

// buildConfig is the build handler's config on db and objects.
func buildConfig(db *gorm.DB, objects registry.Objects) workers.BuildConfig {
	stores := storesOf(db, objects)
	return workers.BuildConfig{
		Deployments: stores.Deployments, Logs: stores.BuildLogs, Objects: objects,
		Sources: workers.NewRegistrySources(stores), Credentials: builder.Credentials{Secrets: stores.Secrets},
	}
}

// TestBuildSurvivesWorkerCrash kills a worker process (SIGKILL) while it fetches a build's
// source; another worker takes the build over once the lease expires, and the build ends once.
func TestBuildSurvivesWorkerCrash(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dbURL := "sqlite:" + filepath.Join(t.TempDir(), "svc.db")
			if dialect == "postgres" {
				dbURL = dbtest.PostgresURL(t)
			}
			testCrash(t, dbURL, "")
		})
	}
}

// redisCrashConfig is the asynq queue of the Redis crash test: asynq's defaults, as `svc worker`
// runs it (the default Lease included), but a quick poll.
func redisCrashConfig(queue string) asynqqueue.Config {
	return asynqqueue.Config{RedisURL: dbtest.RedisURL(), Queue: queue, PollInterval: 100 * time.Millisecond, RetryBase: 10 * time.Millisecond}
}

// TestBuildSurvivesWorkerCrashRedis is TestBuildSurvivesWorkerCrash with the scale-out queue:
// asynq on Redis, the worker killed mid-fetch, another worker taking the build over once our
// liveness key of the dead worker's task has expired (not asynq's one-to-two-minute lease).
func TestBuildSurvivesWorkerCrashRedis(t *testing.T) {
	rdb := dbtest.Redis(t)
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	queue := "svctest_crash_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, "asynq:{"+queue+"}:*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
		_ = rdb.SRem(ctx, "asynq:queues", queue).Err()
	})
	testCrash(t, dbtest.PostgresURL(t), queue)
}

// testCrash runs the crash test on the database at dbURL, with the database queue, or with the
// asynq queue named redisQueue when that is set.
func testCrash(t *testing.T, dbURL, redisQueue string) {
	ctx := context.Background()
	db, err := migrations.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	objDir := t.TempDir()
	objects, err := fsobjects.New(objDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := buildConfig(db, registry.Checked(objects))

	// A git server that holds the first fetch once stall is set, until release is closed.
	root := t.TempDir()
	_, commit := gittest.Init(t, filepath.Join(root, "repo"), agenttest.Dir(t, "hello"))
	var stall atomic.Bool
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	srv := gittest.HTTPServer(t, root, func(backend http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if stall.CompareAndSwap(true, false) {
				held <- struct{}{}
				<-release
				http.Error(w, "gone", http.StatusServiceUnavailable)
				return
			}
			backend.ServeHTTP(w, r)
		})
	})

	a, err := registry.NewAgents(db).Create(ctx, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	cipher, _ := registry.NewCipher([]byte(strings.Repeat("k", 32)))
	if _, err := registry.NewSources(db, cipher, webhook.NormalizeRepoURL).Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: srv.URL + "/repo"}); err != nil {
		t.Fatal(err)
	}
	// Record the build of the branch head and enqueue it through a queue that nobody runs here yet.
	var q workers.Queue
	if redisQueue != "" {
		aq, err := asynqqueue.New(redisCrashConfig(redisQueue))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = aq.Close() })
		q = aq
	} else if q, err = dbqueue.New(db, dbqueue.Config{PollInterval: 10 * time.Millisecond, Lease: time.Second, RetryBase: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	st, err := cfg.Deployments.StartBuild(ctx, registry.BuildRequest{AgentID: a.ID, Environment: "preview-main", Branch: "main", Commit: commit, Trigger: "redeploy"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, workers.NewBuildTask(ctx, st.Build.ID)); err != nil {
		t.Fatal(err)
	}

	// 1. The child worker claims the build and stalls in the fetch; kill it there.
	stall.Store(true)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envCrashChild+"=1", envCrashDB+"="+dbURL, envCrashObjects+"="+objDir, envCrashQueue+"="+redisQueue)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatal("the child worker never fetched")
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // killed: its exit status is the signal
	killed := time.Now()
	b, err := cfg.Deployments.GetBuild(ctx, st.Build.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != registry.BuildRunning || b.Attempts != 1 {
		t.Fatalf("after the crash: build = %+v, want running, attempt 1", b)
	}

	// 2. A new worker takes over after the lease and finishes the build, once.
	mux := workers.NewServeMux()
	mux.Handle(workers.TaskBuild, workers.NewBuildHandler(cfg))
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = q.Run(runCtx, mux) })
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	var d registry.Deployment
	for time.Now().Before(deadline) {
		if d, err = cfg.Deployments.Get(ctx, st.Deployment.ID); err != nil {
			t.Fatal(err)
		}
		if d.Status == registry.StatusReady || d.Status == registry.StatusFailed {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !d.Serving() || d.CommitSHA != commit {
		t.Fatalf("deployment after takeover = %+v", d)
	}
	t.Logf("worker killed -> build finished by another worker after %v", time.Since(killed).Round(time.Millisecond))
	b, err = cfg.Deployments.GetBuild(ctx, st.Build.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != registry.BuildSucceeded || b.Attempts != 2 {
		t.Fatalf("build = %+v, want succeeded after 2 attempts", b)
	}
	logs, err := cfg.Logs.After(ctx, st.Build.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var said bool
	for _, l := range logs {
		said = said || strings.Contains(l.Line, "attempt 1 was interrupted") && strings.Contains(l.Line, "takes the build over")
	}
	if !said {
		t.Errorf("the build log does not say that attempt 1 was interrupted and taken over: %+v", logs)
	}
	acts, err := cfg.Deployments.Activations(ctx, a.ID, "preview-main", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[0].ToDeployID != d.ID {
		t.Fatalf("activations = %+v, want exactly one, of %s", acts, d.ID)
	}
}
