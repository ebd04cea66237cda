package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Proc is one worker process, lent to one call at a time by a Pool.
type Proc struct {
	pool     *Pool
	key      string    // the key it is lent to
	lastUsed time.Time // when it was last released (guarded by the pool's mu)

	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Reader
	control *os.File // the write end of the worker's control pipe (its descriptor 3)
	loan    uint64   // Loan (guarded by the pool's mu)
	stderr  tail
	pid     atomic.Int64 // once started
	baseRSS atomic.Int64 // resident bytes once started

	wmu sync.Mutex // one frame written at a time on stdin
	cmu sync.Mutex // and on the control pipe

	killMu sync.Mutex
	reason error // why the pool or the caller killed it; nil when not killed or killed quietly
	killed bool

	done       chan struct{} // closed when the process was waited for
	waitErr    error
	memoryOnce sync.Once // counts a worker that ended itself over its cap once
}

// start starts the worker and waits for its first frame, which says it serves.
func (w *Proc) start(ctx context.Context) error {
	cfg := w.pool.cfg
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = []string{
		EnvWorker + "=1",
		EnvMemoryMB + "=" + strconv.Itoa(cfg.MemoryMB),
		"GOMAXPROCS=" + strconv.Itoa(min(2, runtime.NumCPU())),
	}
	cmd.Dir = "/"
	cmd.Stderr = &w.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("sandbox: start a worker: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("sandbox: start a worker: %w", err)
	}
	// The control pipe carries what must reach the worker while its code runs (Control), so
	// that the code's own goroutine can read the frames it waits for on stdin.
	controlR, controlW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox: start a worker: %w", err)
	}
	cmd.ExtraFiles = []*os.File{controlR} // descriptor 3
	err = cmd.Start()
	_ = controlR.Close() // the worker's end; the worker has its own copy
	if err != nil {
		_ = controlW.Close()
		return fmt.Errorf("sandbox: start a worker: %w", err)
	}
	w.killMu.Lock()
	w.cmd, w.stdin, w.stdout = cmd, stdin, bufio.NewReaderSize(stdout, 64<<10)
	w.control = controlW
	if w.killed { // the pool closed while it started
		_ = cmd.Process.Kill()
	}
	w.killMu.Unlock()
	w.pid.Store(int64(cmd.Process.Pid))
	w.pool.wg.Add(1)
	go func() {
		defer w.pool.wg.Done()
		w.waitErr = cmd.Wait()
		w.cmu.Lock()
		_ = w.control.Close() // nothing reads it any more
		w.cmu.Unlock()
		close(w.done)
		if s := w.stderr.String(); s != "" {
			w.pool.cfg.Logger.Warn("handler sandbox worker said", "pid", cmd.Process.Pid, "stderr", s)
		}
	}()
	ready := make(chan error, 1)
	go func() {
		_, err := w.Recv()
		ready <- err
	}()
	timer := time.NewTimer(w.pool.cfg.StartTimeout)
	defer timer.Stop()
	got := false
	select {
	case err = <-ready:
		got = true
		if err != nil {
			err = fmt.Errorf("sandbox: the worker %s exited before it served: does its main call the sandbox first? %w", cfg.Path, err)
		}
	case <-timer.C:
		err = fmt.Errorf("sandbox: a worker did not start within %s", w.pool.cfg.StartTimeout)
	case <-ctx.Done():
		err = fmt.Errorf("sandbox: start a worker: %w", context.Cause(ctx))
	}
	if err != nil {
		w.Kill(err)
		if !got {
			<-ready
		}
		return err
	}
	w.baseRSS.Store(w.rss())
	return nil
}

// Send writes b to the worker as one frame. After the worker died it returns why.
func (w *Proc) Send(b []byte) error {
	w.wmu.Lock()
	err := WriteFrame(w.stdin, b)
	w.wmu.Unlock()
	if err != nil {
		return w.Died()
	}
	return nil
}

// Control writes b to the worker's control pipe as one frame, which the worker reads on a
// goroutine of its own (Worker.ReadControl) while its code runs or waits for a frame on stdin:
// the way to interrupt a call. Frames on the control pipe and on stdin are not ordered with
// respect to each other, so a control frame names what it is about (Loan). After the worker
// died it returns why.
func (w *Proc) Control(b []byte) error {
	w.cmu.Lock()
	err := WriteFrame(w.control, b)
	w.cmu.Unlock()
	if err != nil {
		return w.Died()
	}
	return nil
}

// Loan numbers the worker's current loan by the pool: 1 for the first Acquire that returned
// it, 2 for the next, and so on. The holder can name its call with it in the frames it sends,
// so that a late control frame about an earlier call is told apart from one about this call.
func (w *Proc) Loan() uint64 {
	w.pool.mu.Lock()
	defer w.pool.mu.Unlock()
	return w.loan
}

// maxFrame bounds a frame from a worker: results and journal values are bounded well below.
const maxFrame = 64 << 20

// Recv reads the worker's next frame. When the worker died (or was killed), it returns why.
// Only one goroutine may call it at a time.
func (w *Proc) Recv() ([]byte, error) {
	b, err := ReadFrame(w.stdout, maxFrame)
	if err == nil {
		return b, nil
	}
	if errors.Is(err, ErrFrameTooBig) {
		w.Kill(fmt.Errorf("its worker sent a message over %d MiB", maxFrame>>20))
	}
	w.killMu.Lock()
	killed, reason := w.killed, w.reason
	w.killMu.Unlock()
	if killed && reason != nil { // why is known: do not wait for the process to be reaped
		return nil, reason
	}
	return nil, w.Died()
}

// Kill kills the worker with SIGKILL. reason, when not nil, is what Died reports from now on
// (the first reason given wins).
func (w *Proc) Kill(reason error) {
	w.killMu.Lock()
	if !w.killed || (w.reason == nil && reason != nil) {
		w.reason = reason
		switch {
		case errors.Is(reason, ErrMemory):
			w.pool.killedMemory.Add(1)
		case errors.Is(reason, ErrOverran):
			w.pool.killedOverran.Add(1)
		}
	}
	w.killed = true
	if w.cmd != nil {
		_ = w.cmd.Process.Kill() // an exited process is fine
	}
	w.killMu.Unlock()
}

// exited reports whether the worker process was killed or exited.
func (w *Proc) exited() bool {
	w.killMu.Lock()
	killed := w.killed
	w.killMu.Unlock()
	if killed {
		return true
	}
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// Died waits (at most a second) for the worker to exit and says why it did: the reason it was
// killed with, its memory cap, or its exit status and the last line it wrote on standard error.
func (w *Proc) Died() error {
	select {
	case <-w.done:
	case <-time.After(time.Second):
		w.Kill(nil)
		<-w.done
	}
	w.killMu.Lock()
	reason := w.reason
	w.killMu.Unlock()
	if reason != nil {
		return reason
	}
	tail := w.stderr.String()
	var ee *exec.ExitError
	if errors.As(w.waitErr, &ee) && ee.ExitCode() == ExitMemory || strings.Contains(tail, "out of memory") {
		w.memoryOnce.Do(func() { w.pool.killedMemory.Add(1) })
		return fmt.Errorf("its worker went over the memory cap of %d MiB per call (SVC_HANDLER_MEMORY_MB): %w", w.pool.cfg.MemoryMB, ErrMemory)
	}
	if line := lastLine(tail); line != "" {
		return fmt.Errorf("sandbox: the worker exited (%v): %s", w.waitErr, line)
	}
	return fmt.Errorf("sandbox: the worker exited (%v)", w.waitErr)
}

// rss is the worker's resident set in bytes, 0 when unknown.
func (w *Proc) rss() int64 {
	pid := w.pid.Load()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatInt(pid, 10) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64) // 0 when garbled
	return pages * int64(os.Getpagesize())
}

// tail keeps the last 4 KiB written to it: a worker's standard error.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
