package dbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/migrations/dbtest"
	"svc/workers"
	"svc/workers/dbqueue"
	"svc/workers/queuetest"
)

// The reclaim helper: a worker process of one instance whose handler records its start and then
// blocks until the process is killed.
const (
	envReclaimAddr     = "SVC_TEST_RECLAIM_ADDR"
	envReclaimInstance = "SVC_TEST_RECLAIM_INSTANCE"
	envReclaimFile     = "SVC_TEST_RECLAIM_FILE"
	reclaimType        = "reclaim:test"
	// reclaimLease is far longer than any test waits: a task run again came back by reclaim.
	reclaimLease = 10 * time.Minute
)

// TestReclaimHelper is the body of the reclaim test's child processes; it skips otherwise.
func TestReclaimHelper(t *testing.T) {
	addr, instance, file := os.Getenv(envReclaimAddr), os.Getenv(envReclaimInstance), os.Getenv(envReclaimFile)
	if addr == "" {
		t.Skip("child process of TestRestartTakesBackOwnClaims")
	}
	q, err := dbqueue.New(openDB(t, addr), dbqueue.Config{PollInterval: 10 * time.Millisecond, Lease: reclaimLease, Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	mux := workers.NewServeMux()
	mux.HandleFunc(reclaimType, func(ctx context.Context, task workers.Task) error {
		if err := queuetest.AppendLine(file, fmt.Sprintf("start %s %d", task.ID, workers.Attempt(ctx))); err != nil {
			return err
		}
		<-ctx.Done() // the parent kills this process long before
		return ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // outlives no dead parent
	defer cancel()
	if err := q.Run(ctx, mux); err != nil {
		t.Fatal(err)
	}
}

// child is one reclaim helper process.
type child struct {
	cmd  *exec.Cmd
	out  *strings.Builder
	done chan struct{}
	once sync.Once
}

func startChild(t *testing.T, addr, instance, file string) *child {
	t.Helper()
	c := &child{out: &strings.Builder{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestReclaimHelper$", "-test.count=1")
	c.cmd.Env = append(os.Environ(), envReclaimAddr+"="+addr, envReclaimInstance+"="+instance, envReclaimFile+"="+file)
	var mu sync.Mutex
	c.cmd.Stdout = lockedWriter{&mu, c.out}
	c.cmd.Stderr = lockedWriter{&mu, c.out}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = c.cmd.Wait() // killed: the status is the signal
		close(c.done)
	}()
	t.Cleanup(c.kill)
	return c
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// kill sends SIGKILL and waits until the process is gone.
func (c *child) kill() {
	c.once.Do(func() {
		if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			panic(err)
		}
		<-c.done
	})
}

// waitLine waits (generously) until file holds line.
func (c *child) waitLine(t *testing.T, file, line string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !slices.Contains(queuetest.ReadLines(t, file), line) {
		select {
		case <-c.done:
			t.Fatalf("child exited before writing %q:\n%s", line, c.out.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within a minute; child output:\n%s", line, c.out.String())
		}
	}
}

// killAndRestart enqueues task id, lets a child of instance claim it, kills that child, starts a
// new child of the same instance and returns how long after the kill the task started again.
func killAndRestart(t *testing.T, addr, instance, file, id string, other func()) time.Duration {
	t.Helper()
	q, err := dbqueue.New(openDB(t, addr), dbqueue.Config{Lease: reclaimLease})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(context.Background(), workers.Task{Type: reclaimType, ID: id}, workers.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	first := startChild(t, addr, instance, file)
	first.waitLine(t, file, "start "+id+" 1")
	first.kill()
	killed := time.Now()
	if other != nil {
		other()
	}
	second := startChild(t, addr, instance, file)
	second.waitLine(t, file, "start "+id+" 2")
	took := time.Since(killed)
	second.kill()
	return took
}

// TestRestartTakesBackOwnClaims: a worker process killed with SIGKILL mid-task leaves a claim
// with a long lease; a queue of another instance does not take it before the lease, and a new
// process of the same instance takes it back at once.
func TestRestartTakesBackOwnClaims(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			var addr string
			if dialect == "postgres" {
				addr = dbtest.PostgresURL(t)
				openDB(t, addr) // migrates it
			} else {
				path := filepath.Join(t.TempDir(), "svc.db")
				dbtest.SQLiteAt(t, path)
				addr = "sqlite:" + path
			}
			file := filepath.Join(t.TempDir(), "events")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			instance := t.TempDir() // like svc up's data dir
			otherInstance := func() {
				// Another instance on the same host, running for a while: it must not take
				// the dead claim, whose lease is far from expired.
				q, err := dbqueue.New(openDB(t, addr), dbqueue.Config{PollInterval: 10 * time.Millisecond, Lease: reclaimLease, Instance: instance + "-other"})
				if err != nil {
					t.Fatal(err)
				}
				mux := workers.NewServeMux()
				stolen := make(chan string, 1)
				mux.HandleFunc(reclaimType, func(_ context.Context, task workers.Task) error {
					stolen <- task.ID
					return nil
				})
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if err := q.Run(ctx, mux); err != nil {
					t.Fatal(err)
				}
				select {
				case id := <-stolen:
					t.Errorf("a queue of another instance ran task %s before its lease expired", id)
				default:
				}
			}
			took := killAndRestart(t, addr, instance, file, "build-1", otherInstance)
			t.Logf("the restarted process took the task back %v after the kill (lease %v)", took.Round(time.Millisecond), reclaimLease)
			if got, want := queuetest.ReadLines(t, file), []string{"start build-1 1", "start build-1 2"}; !slices.Equal(got, want) {
				t.Errorf("runs = %q, want %q", got, want)
			}
		})
	}
}

// TestRecoveryBenchmarkDBQueue measures, for BENCHMARKS.md, kill -9 of a worker process of svc
// up's queue (SQLite, one data dir) → the task started again by the restarted process, over 10
// kills. Run with SVC_RECOVERY_BENCH=1.
func TestRecoveryBenchmarkDBQueue(t *testing.T) {
	if os.Getenv("SVC_RECOVERY_BENCH") == "" {
		t.Skip("set SVC_RECOVERY_BENCH=1 to measure")
	}
	var took []time.Duration
	for i := range 10 {
		dir := t.TempDir()
		path := filepath.Join(dir, "svc.db")
		dbtest.SQLiteAt(t, path)
		file := filepath.Join(dir, "events")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		took = append(took, killAndRestart(t, "sqlite:"+path, dir, file, fmt.Sprint("build-", i), nil))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("dbqueue kill -9 -> restarted process runs the task again, 10 kills: p50 %v, min %v, max %v (all: %v)",
		took[len(took)/2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), took)
}
