package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The environment a Pool gives a worker process.
const (
	// EnvWorker is "1" in a worker process.
	EnvWorker = "SVC_SANDBOX_WORKER"
	// EnvMemoryMB is the memory cap of one call, in MiB.
	EnvMemoryMB = "SVC_SANDBOX_MEMORY_MB"
)

// ExitMemory is the exit status of a worker that stopped a call over its memory cap.
const ExitMemory = 86

// workerPriority is the nice value of workers: the runner's own goroutines come first.
const workerPriority = 5

// gcPercent is the GOGC of a worker.
const gcPercent = 400

// watchEvery is how often a worker looks at its heap during a call.
const watchEvery = 2 * time.Millisecond

// IsWorker reports whether this process was started by a Pool as a worker.
func IsWorker() bool { return os.Getenv(EnvWorker) == "1" }

// Worker is the worker process's side of the pool: the frames it reads and writes on its
// standard input and output, and the watch over its memory.
type Worker struct {
	in    *bufio.Reader
	ctl   *bufio.Reader // the control pipe, descriptor 3 (Proc.Control)
	outMu sync.Mutex
	out   io.Writer
	cap   uint64 // bytes a call may grow the heap by
	watch watch  // Begin
}

// NewWorker sets this process up as a worker (IsWorker): its address-space limit and its
// priority, from the environment the pool gave it.
func NewWorker() (*Worker, error) {
	mb, err := strconv.Atoi(os.Getenv(EnvMemoryMB))
	if err != nil || mb <= 0 {
		return nil, fmt.Errorf("sandbox worker: %s=%q is not a number of MiB", EnvMemoryMB, os.Getenv(EnvMemoryMB))
	}
	w := &Worker{in: bufio.NewReaderSize(os.Stdin, 64<<10), ctl: bufio.NewReaderSize(os.NewFile(3, "control"), 4<<10),
		out: os.Stdout, cap: uint64(mb) << 20}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, workerPriority); err != nil {
		return nil, fmt.Errorf("sandbox worker: lower the priority: %w", err)
	}
	// The address space: what the Go runtime reserved at start, plus room for the cap many
	// times over (the heap's spans, the garbage collector's own memory). It stops one huge
	// allocation, which the heap watch could only see after it succeeded.
	if vsz := virtualSize(); vsz > 0 {
		limit := vsz + 8*w.cap + 1<<30
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
			return nil, fmt.Errorf("sandbox worker: limit the address space: %w", err)
		}
	}
	// The garbage collector works to keep the heap under the cap, with room for the worker's
	// own memory, so that a call that makes garbage at a high rate is not taken for one that
	// keeps what it makes. Set once: changing it stops the world.
	debug.SetMemoryLimit(int64(w.cap + w.cap/4 + 64<<20))
	// A worker's heap is small and almost all of what a call allocates is garbage once it
	// returns: at the default GOGC a collection ran every 18 calls of a handler with three
	// rpcs, and marking and sweeping took a fifth of the worker's CPU. Four times the live heap
	// between collections costs about 4 MiB more per worker (BENCHMARKS.md).
	debug.SetGCPercent(gcPercent)
	return w, nil
}

// Read reads the next frame from the pool.
func (w *Worker) Read(limit int) ([]byte, error) { return ReadFrame(w.in, limit) }

// ReadControl reads the next frame from the pool's control pipe (Proc.Control). Only one
// goroutine may call it at a time; it may be another than the one that calls Read.
func (w *Worker) ReadControl(limit int) ([]byte, error) { return ReadFrame(w.ctl, limit) }

// Write sends b to the pool as one frame. It is safe for concurrent use.
func (w *Worker) Write(b []byte) error {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	return WriteFrame(w.out, b)
}

// Begin starts the watch over the memory of one call: from now on, a heap that grows past its
// size now plus the cap ends the process with ExitMemory, after a line on standard error. The
// function it returns ends the watch. Only one call may be watched at a time.
//
// The watch is a timer, not a goroutine: a call shorter than watchEvery starts nothing and
// wakes nothing, and a longer one is looked at every watchEvery by the timer's function.
func (w *Worker) Begin() (end func()) {
	m := &w.watch
	m.mu.Lock()
	m.active, m.base = true, heapLive()
	m.limit = m.base + w.cap
	if m.timer == nil {
		m.timer = time.AfterFunc(watchEvery, w.look)
	} else {
		m.timer.Reset(watchEvery)
	}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		m.active = false
		m.timer.Stop()
		m.mu.Unlock()
	}
}

// watch is the state of the memory watch of the call in flight.
type watch struct {
	mu      sync.Mutex // held while the heap is looked at: end waits for a look under way
	active  bool
	base    uint64 // the heap at the call's start
	limit   uint64 // base plus the cap
	timer   *time.Timer
	lastGC  time.Time
	samples []metrics.Sample
}

// look is one look at the heap of the call in flight, every watchEvery until the watch ends.
func (w *Worker) look() {
	m := &w.watch
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.active {
		return
	}
	defer m.timer.Reset(watchEvery)
	if m.samples == nil {
		m.samples = []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	}
	metrics.Read(m.samples)
	live, objects := m.samples[0].Value.Uint64(), m.samples[1].Value.Uint64()
	if live <= m.limit && objects <= m.limit+w.cap/4 {
		return
	}
	// Over, as the last collection saw it, or growing faster than collections run: count
	// what is reachable now (at most every 20 ms).
	if time.Since(m.lastGC) < 20*time.Millisecond {
		return
	}
	runtime.GC()
	m.lastGC = time.Now()
	if live := heapLive(); live > m.limit {
		fmt.Fprintf(os.Stderr, "sandbox: the call holds %d MiB, over its cap of %d MiB\n", (live-m.base)>>20, w.cap>>20)
		os.Exit(ExitMemory)
	}
}

// heapLive is the heap the last garbage collection found reachable.
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// virtualSize is this process's address space in bytes, 0 when unknown.
func virtualSize() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var pages uint64
	if _, err := fmt.Sscan(string(b), &pages); err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
