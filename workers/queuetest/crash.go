package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/workers"
)

// Environment of the helper process.
const (
	envAddr = "SVC_QUEUETEST_HELPER_ADDR"
	envFile = "SVC_QUEUETEST_HELPER_FILE"
)

const (
	crashType = "queuetest:crash"
	// helperLifetime stops a helper whose parent died without killing it.
	helperLifetime = 5 * time.Minute
	// realLeaseLimit bounds the wait for recovery when the suite waits for a real lease.
	realLeaseLimit = 4 * time.Minute
)

// HelperProcess is the body of the TestHelperProcess that each implementation's test package must
// declare; it does nothing (skips) unless the crash test started this process. It runs a worker
// whose crash-test handler records its start in a file and then blocks until the process is killed.
func HelperProcess(t *testing.T, openQueue func(tb testing.TB, addr string, cfg Config) workers.Queue) {
	addr, file := os.Getenv(envAddr), os.Getenv(envFile)
	if addr == "" || file == "" {
		t.Skip("helper process of queuetest's crash test; runs only when the suite starts it")
	}
	q := openQueue(t, addr, baseConfig(t))
	mux := workers.NewServeMux()
	mux.HandleFunc(crashType, func(ctx context.Context, task workers.Task) error {
		if err := AppendLine(file, fmt.Sprintf("start %s %d", task.ID, workers.Attempt(ctx))); err != nil {
			return err
		}
		<-ctx.Done() // the parent kills this process long before
		return ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), helperLifetime)
	defer cancel()
	if err := q.Run(ctx, mux); err != nil {
		t.Fatal(err)
	}
}

// testCrash kills a worker process mid-task and checks that another worker completes the task
// exactly once more; when lastAttempt is set, the lost attempt was the only one allowed, and the
// task must fail with ErrWorkerLost, told to its handler, without running again.
func testCrash(t *testing.T, h Harness, lastAttempt bool) {
	l := newRecorder()
	cfg := baseConfig(t)
	addr := h.New(t)
	q := h.Open(t, addr, cfg)
	file := filepath.Join(t.TempDir(), "events")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	retries := 3
	if lastAttempt {
		retries = 0
	}
	enqueue(t, q, workers.Task{Type: crashType, ID: "crash", Payload: []byte("p")}, workers.MaxRetry(retries), workers.Timeout(time.Minute))

	// 1. A worker in another process starts the task and is killed with SIGKILL.
	child := startHelper(t, addr, file)
	child.waitLine(t, file, "start crash 1")
	child.kill(t)
	killed := time.Now()

	// 2. The dead worker's lease runs out (or is aged, where it cannot be shortened).
	limit := waitLimit
	if h.ExpireLeases != nil {
		h.ExpireLeases(t, addr)
	} else {
		limit = realLeaseLimit
	}

	// 3. A new worker picks the task up again.
	mux := workers.NewServeMux()
	l.handle(mux, crashType, func(ctx context.Context, task workers.Task) error {
		attempt := workers.Attempt(ctx)
		if err := AppendLine(file, fmt.Sprintf("start %s %d", task.ID, attempt)); err != nil {
			return err
		}
		if err := AppendLine(file, fmt.Sprintf("done %s %d", task.ID, attempt)); err != nil {
			return err
		}
		l.add("done")
		return nil
	})
	stop := start(t, q, mux)
	want := []string{"start crash 1", "start crash 2", "done crash 2"}
	ev := "done"
	if lastAttempt {
		want = want[:1]
		ev = "failed crash"
	}
	l.waitWithin(t, ev, 1, limit)
	t.Logf("worker killed -> task %s in another worker after %v", ev, time.Since(killed).Round(time.Millisecond))
	stop()
	if got := ReadLines(t, file); !slices.Equal(got, want) {
		t.Errorf("runs = %q, want %q", got, want)
	}
	errs := l.failures("crash")
	switch {
	case lastAttempt && (len(errs) != 1 || !errors.Is(errs[0], workers.ErrWorkerLost)):
		t.Errorf("TaskFailed errors = %v, want one wrapping ErrWorkerLost", errs)
	case !lastAttempt && len(errs) != 0:
		t.Errorf("TaskFailed called with %v for a task that completed", errs)
	}
	// The task is finished either way: its ID is free.
	if err := q.Enqueue(context.Background(), workers.Task{Type: crashType, ID: "crash"}); err != nil {
		t.Errorf("Enqueue after recovery = %v, want nil", err)
	}
}

// helper is a worker running in a child process.
type helper struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	exited chan struct{}
}

func startHelper(t *testing.T, addr, file string) *helper {
	t.Helper()
	h := &helper{exited: make(chan struct{})}
	h.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	h.cmd.Env = append(os.Environ(), envAddr+"="+addr, envFile+"="+file)
	h.cmd.Stdout = &h.out
	h.cmd.Stderr = &h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start helper process: %v", err)
	}
	go func() {
		_ = h.cmd.Wait() // the exit status of a killed helper says nothing; its output does
		close(h.exited)
	}()
	t.Cleanup(func() { h.kill(t) })
	return h
}

// waitLine waits until file holds line, failing if the helper exits first.
func (h *helper) waitLine(t *testing.T, file, line string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !slices.Contains(ReadLines(t, file), line) {
		select {
		case <-h.exited:
			t.Fatalf("helper process exited before %q (does the test package declare TestHelperProcess calling queuetest.HelperProcess?); output:\n%s", line, h.out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			h.kill(t)
			t.Fatalf("helper process wrote no %q within %v; output:\n%s", line, waitLimit, h.out.String())
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (h *helper) kill(t *testing.T) {
	select {
	case <-h.exited:
		return
	default:
	}
	if err := h.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill helper process: %v", err)
	}
	<-h.exited
}

// AppendLine appends one line to file with a single write, so that the lines of two processes
// never interleave: how a helper process reports what it did.
func AppendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open event file: %w", err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		_ = f.Close() // the write error is the one worth reporting
		return fmt.Errorf("write event file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close event file: %w", err)
	}
	return nil
}

// ReadLines returns the lines of file.
func ReadLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read event file: %v", err)
	}
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
}
