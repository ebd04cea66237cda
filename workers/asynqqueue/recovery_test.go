package asynqqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/workers"
	"svc/workers/asynqqueue"
	"svc/workers/queuetest"
)

// The recovery benchmark's worker processes.
const (
	envRecoveryAddr = "SVC_TEST_RECOVERY_ADDR"
	envRecoveryFile = "SVC_TEST_RECOVERY_FILE"
	recoveryType    = "recovery:bench"
)

// TestRecoveryHelper is a worker process of TestRecoveryBenchmarkRedis, configured as `svc worker`
// configures its queue (asynqqueue's defaults); it skips unless that test started it. Its handler
// records "start <id> <attempt> <pid>"; a first attempt then blocks until the process is killed,
// a later one succeeds.
func TestRecoveryHelper(t *testing.T) {
	addr, file := os.Getenv(envRecoveryAddr), os.Getenv(envRecoveryFile)
	if addr == "" {
		t.Skip("worker process of TestRecoveryBenchmarkRedis")
	}
	u, queue := splitAddr(t, addr)
	q, err := asynqqueue.New(asynqqueue.Config{RedisURL: u, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	mux := workers.NewServeMux()
	mux.HandleFunc(recoveryType, func(ctx context.Context, task workers.Task) error {
		if err := queuetest.AppendLine(file, fmt.Sprintf("start %s %d %d", task.ID, workers.Attempt(ctx), os.Getpid())); err != nil {
			return err
		}
		if workers.Attempt(ctx) == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // outlives no dead parent
	defer cancel()
	if err := q.Run(ctx, mux); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryBenchmarkRedis measures, for BENCHMARKS.md, worker death → task started again on
// Redis: two worker processes, the one running the task killed with SIGKILL, over 10 kills; the
// figure is the time from the kill to the next attempt's start in the other process. Run with
// SVC_RECOVERY_BENCH=1.
func TestRecoveryBenchmarkRedis(t *testing.T) {
	if os.Getenv("SVC_RECOVERY_BENCH") == "" {
		t.Skip("set SVC_RECOVERY_BENCH=1 to measure")
	}
	addr := harness.New(t)
	file := filepath.Join(t.TempDir(), "events")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	u, queue := splitAddr(t, addr)
	q, err := asynqqueue.New(asynqqueue.Config{RedisURL: u, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	live := map[int]*worker{}
	var took []time.Duration
	for i := range 10 {
		for len(live) < 2 {
			w := startWorker(t, addr, file)
			live[w.cmd.Process.Pid] = w
		}
		id := fmt.Sprint("task-", i)
		if err := q.Enqueue(context.Background(), workers.Task{Type: recoveryType, ID: id}, workers.MaxRetry(3)); err != nil {
			t.Fatal(err)
		}
		pid := waitStart(t, file, id, 1)
		w := live[pid]
		if w == nil {
			t.Fatalf("task %s started in unknown process %d", id, pid)
		}
		w.kill()
		killed := time.Now()
		delete(live, pid)
		waitStart(t, file, id, 2)
		took = append(took, time.Since(killed))
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("asynq (Redis, Lease %v) kill -9 of the worker running the task -> the other worker starts it again, 10 kills: p50 %v, min %v, max %v (in order: %v)",
		asynqqueue.DefaultLease, sorted[len(sorted)/2].Round(time.Millisecond), sorted[0].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), took)
}

// worker is one TestRecoveryHelper process.
type worker struct {
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

func startWorker(t *testing.T, addr, file string) *worker {
	t.Helper()
	w := &worker{done: make(chan struct{})}
	w.cmd = exec.Command(os.Args[0], "-test.run=^TestRecoveryHelper$", "-test.count=1")
	w.cmd.Env = append(os.Environ(), envRecoveryAddr+"="+addr, envRecoveryFile+"="+file)
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = w.cmd.Wait() // killed: the status is the signal
		close(w.done)
	}()
	t.Cleanup(w.kill)
	return w
}

// kill sends SIGKILL and waits until the process is gone.
func (w *worker) kill() {
	w.once.Do(func() {
		if err := w.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			panic(err)
		}
		<-w.done
	})
}

// waitStart waits (generously) for attempt of task id to start and returns its process's pid.
func waitStart(t *testing.T, file, id string, attempt int) int {
	t.Helper()
	prefix := fmt.Sprintf("start %s %d ", id, attempt)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				var pid int
				if _, err := fmt.Sscan(rest, &pid); err != nil {
					t.Fatalf("bad line %q", line)
				}
				return pid
			}
		}
	}
	t.Fatalf("attempt %d of %s never started", attempt, id)
	return 0
}
