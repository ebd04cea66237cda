package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/runner/sandbox"
)

// TestMain makes this test binary a worker that echoes frames, with a few commands: "hang"
// never answers, "grow" keeps what it allocates under the memory watch, "exit" exits 3 after a
// line on standard error, "control" answers with the next frame of the control pipe.
func TestMain(m *testing.M) {
	if sandbox.IsWorker() {
		os.Exit(echo())
	}
	os.Exit(m.Run())
}

func echo() int {
	w, err := sandbox.NewWorker()
	if err != nil {
		return 1
	}
	if err := w.Write([]byte("ready")); err != nil {
		return 1
	}
	var kept [][]byte
	defer func() { _ = kept }()
	for {
		b, err := w.Read(1 << 20)
		if err != nil {
			return 0
		}
		switch string(b) {
		case "hang":
			time.Sleep(time.Hour)
		case "grow":
			kept = grow(w)
		case "exit":
			os.Stderr.WriteString("worker: leaving on purpose\n")
			return 3
		case "env":
			b = []byte(strings.Join(os.Environ(), " "))
		case "control":
			if b, err = w.ReadControl(1 << 10); err != nil {
				return 1
			}
		}
		if err := w.Write(b); err != nil {
			return 1
		}
	}
}

// grow allocates under the memory watch until the watch ends the process.
func grow(w *sandbox.Worker) [][]byte {
	end := w.Begin()
	defer end()
	var kept [][]byte
	for len(kept) < 1<<20 {
		kept = append(kept, bytes.Repeat([]byte{1}, 1<<20))
	}
	return kept
}

func newPool(t *testing.T, cfg sandbox.Config) *sandbox.Pool {
	t.Helper()
	p, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// roundTrip sends msg to a worker of key and returns its answer.
func roundTrip(t *testing.T, p *sandbox.Pool, key, msg string) (string, error) {
	t.Helper()
	w, err := p.Acquire(t.Context(), key, false)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := w.Send([]byte(msg)); err != nil {
		p.Release(w, false)
		return "", err
	}
	b, err := w.Recv()
	p.Release(w, err == nil)
	return string(b), err
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	for _, msg := range []string{"", "one", strings.Repeat("x", 100_000)} {
		if err := sandbox.WriteFrame(&buf, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(&buf)
	for _, want := range []string{"", "one", strings.Repeat("x", 100_000)} {
		got, err := sandbox.ReadFrame(r, 1<<20)
		if err != nil || string(got) != want {
			t.Fatalf("ReadFrame = %d bytes, %v; want %d", len(got), err, len(want))
		}
	}
	if _, err := sandbox.ReadFrame(r, 1<<20); !errors.Is(err, io.EOF) {
		t.Errorf("ReadFrame at the end = %v, want io.EOF", err)
	}
	_ = sandbox.WriteFrame(&buf, make([]byte, 100))
	if _, err := sandbox.ReadFrame(bufio.NewReader(&buf), 99); !errors.Is(err, sandbox.ErrFrameTooBig) {
		t.Errorf("ReadFrame over its limit = %v, want ErrFrameTooBig", err)
	}
	buf.Reset()
	buf.Write([]byte{0, 0, 0, 9, 'a'})
	if _, err := sandbox.ReadFrame(bufio.NewReader(&buf), 99); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadFrame of a cut frame = %v, want io.ErrUnexpectedEOF", err)
	}
}

// A worker is reused between calls, and one that was not released clean is replaced.
func TestReuseAndReplace(t *testing.T) {
	p := newPool(t, sandbox.Config{MaxProcs: 2})
	for i := range 5 {
		if got, err := roundTrip(t, p, "a", "hello"); err != nil || got != "hello" {
			t.Fatalf("call %d = %q, %v", i, got, err)
		}
	}
	if s := p.Stats(); s.Started != 1 || s.Procs != 1 || s.Idle != 1 {
		t.Errorf("after 5 calls: %+v, want one worker started and idle", s)
	}
	w, err := p.Acquire(t.Context(), "a", false)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(w, false)
	if got, err := roundTrip(t, p, "a", "again"); err != nil || got != "again" {
		t.Fatalf("after a dirty release = %q, %v", got, err)
	}
	if s := p.Stats(); s.Started != 2 || s.Procs != 1 {
		t.Errorf("after a dirty release: %+v, want a second worker in place of the first", s)
	}
}

// Control frames reach a worker on a pipe of their own, which it reads while it waits for
// nothing on stdin; Loan numbers each loan of a worker.
func TestControl(t *testing.T) {
	p := newPool(t, sandbox.Config{MaxProcs: 1})
	for want := range uint64(3) {
		w, err := p.Acquire(t.Context(), "a", false)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Loan(); got != want+1 {
			t.Errorf("loan %d of the worker: Loan = %d", want+1, got)
		}
		if err := w.Send([]byte("control")); err != nil {
			t.Fatal(err)
		}
		if err := w.Control([]byte("stop, please")); err != nil {
			t.Fatal(err)
		}
		if b, err := w.Recv(); err != nil || string(b) != "stop, please" {
			t.Errorf("Recv = %q, %v; want the control frame echoed", b, err)
		}
		p.Release(w, true)
	}
	if s := p.Stats(); s.Started != 1 {
		t.Errorf("%+v: want one worker for the three loans", s)
	}
}

// A worker's environment holds only what the pool gives it.
func TestWorkerEnvironment(t *testing.T) {
	t.Setenv("SVC_SECRET_KEY", "do-not-leak")
	p := newPool(t, sandbox.Config{MemoryMB: 20})
	got, err := roundTrip(t, p, "a", "env")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SVC_SANDBOX_WORKER=1", "SVC_SANDBOX_MEMORY_MB=20", "GOMAXPROCS="} {
		if !strings.Contains(got, want) {
			t.Errorf("worker environment %q lacks %s", got, want)
		}
	}
	if strings.Contains(got, "do-not-leak") {
		t.Errorf("worker environment %q has the runner's secret", got)
	}
}

// A worker that goes over its memory cap during a call dies, and says so.
func TestMemoryCap(t *testing.T) {
	p := newPool(t, sandbox.Config{MemoryMB: 16})
	_, err := roundTrip(t, p, "a", "grow")
	if !errors.Is(err, sandbox.ErrMemory) || !strings.Contains(err.Error(), "16 MiB per call (SVC_HANDLER_MEMORY_MB)") {
		t.Errorf("error = %v, want the memory cap", err)
	}
	if got, err := roundTrip(t, p, "a", "after"); err != nil || got != "after" {
		t.Errorf("next call = %q, %v", got, err)
	}
}

// A worker that exits says why: its exit status and the last line it wrote on standard error.
func TestWorkerExit(t *testing.T) {
	p := newPool(t, sandbox.Config{})
	_, err := roundTrip(t, p, "a", "exit")
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "worker: leaving on purpose") {
		t.Errorf("error = %v, want the exit status and the worker's last words", err)
	}
}

// A killed worker's Recv returns the reason it was killed with.
func TestKillReason(t *testing.T) {
	p := newPool(t, sandbox.Config{})
	w, err := p.Acquire(t.Context(), "a", false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(w, false)
	if err := w.Send([]byte("hang")); err != nil {
		t.Fatal(err)
	}
	reason := errors.New("ran past its deadline")
	time.AfterFunc(20*time.Millisecond, func() { w.Kill(reason) })
	if _, err := w.Recv(); !errors.Is(err, reason) {
		t.Errorf("Recv of a killed worker = %v, want the reason", err)
	}
}

// Acquire waits for a worker when the bounds are reached, until one is released or its ctx
// ends; a nested call is not bound; one key holds at most MaxPerKey workers.
func TestBounds(t *testing.T) {
	p := newPool(t, sandbox.Config{MaxProcs: 2, MaxPerKey: 1})
	a, err := p.Acquire(t.Context(), "a", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Acquire(ctx, "a", false); !errors.Is(err, sandbox.ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second worker for key a = %v, want ErrBusy and the deadline", err)
	}
	nested, err := p.Acquire(t.Context(), "a", true)
	if err != nil {
		t.Fatalf("nested Acquire: %v", err)
	}
	p.Release(nested, true)
	b, err := p.Acquire(t.Context(), "b", false)
	if err != nil {
		t.Fatalf("a worker for key b: %v", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		w, err := p.Acquire(t.Context(), "a", false) // waits for a's worker
		if err != nil {
			t.Errorf("waiting Acquire: %v", err)
			return
		}
		p.Release(w, true)
	})
	time.Sleep(20 * time.Millisecond)
	p.Release(a, true)
	wg.Wait()
	p.Release(b, true)
}

// Close kills every worker, busy ones too, and Acquire fails after it.
func TestClose(t *testing.T) {
	p, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.Acquire(t.Context(), "a", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send([]byte("hang")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Recv()
		done <- err
	}()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("busy worker's Recv after Close = %v, want ErrClosed", err)
	}
	p.Release(w, true)
	if _, err := p.Acquire(t.Context(), "a", false); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
}

// A worker executable that does not serve workers (a test binary without the TestMain of
// package handlerstest) fails its start with a message that says what is missing.
func TestWorkerThatDoesNotServe(t *testing.T) {
	p := newPool(t, sandbox.Config{Path: "/bin/true", Args: []string{}})
	_, err := p.Acquire(t.Context(), "a", false)
	if err == nil || !strings.Contains(err.Error(), "does its main call the sandbox first") {
		t.Errorf("Acquire = %v, want a message about the worker's main", err)
	}
}
