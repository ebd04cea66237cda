package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	DefaultMaxProcs     = 8
	DefaultMemoryMB     = 128
	DefaultGrace        = 40 * time.Millisecond
	DefaultIdleTimeout  = time.Minute
	DefaultStartTimeout = 10 * time.Second
)

// monitorEvery is how often the pool reads the resident set of its busy workers.
const monitorEvery = 25 * time.Millisecond

var (
	// ErrClosed is returned by Acquire once the pool is closed.
	ErrClosed = errors.New("sandbox: pool closed")
	// ErrMemory is wrapped by the error of a worker stopped over its memory cap.
	ErrMemory = errors.New("sandbox: over the memory cap")
	// ErrBusy is wrapped by the error of an Acquire that found no worker free in time.
	ErrBusy = errors.New("sandbox: every worker is busy")
	// ErrOverran is the reason to give Kill for a worker that did not stop its call in time.
	ErrOverran = errors.New("sandbox: the call did not stop at its deadline")
)

// Config configures a Pool. Zero values take the defaults above.
type Config struct {
	// Path is the executable of the workers; empty: this one (os.Executable). It must serve
	// workers when EnvWorker is set, before anything else (cmd/svc's main does, and the
	// TestMain of every test package that runs handlers).
	Path string
	// Args are the workers' arguments; nil: "-test.run=^$", so that a test binary that does
	// not serve workers runs no test instead of running itself again.
	Args []string
	// MaxProcs bounds the workers of the pool; a nested call (Acquire's nested) may start one
	// more, so that calls waiting for their children cannot take every worker.
	MaxProcs int
	// MaxPerKey bounds the workers one key (an agent) holds at once; default max(1, MaxProcs/2).
	MaxPerKey int
	// MemoryMB is how much one call may grow its worker's heap by.
	MemoryMB int
	// Grace is how long a worker asked to stop has before it is killed.
	Grace time.Duration
	// IdleTimeout ends workers unused for that long, but one.
	IdleTimeout time.Duration
	// StartTimeout bounds a worker's start, up to its first frame.
	StartTimeout time.Duration
	// Logger logs what workers write on standard error and why they were killed.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxProcs <= 0 {
		c.MaxProcs = DefaultMaxProcs
	}
	if c.MaxPerKey <= 0 {
		c.MaxPerKey = max(1, c.MaxProcs/2)
	}
	if c.MemoryMB <= 0 {
		c.MemoryMB = DefaultMemoryMB
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.Args == nil {
		c.Args = []string{"-test.run=^$"}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Pool keeps worker processes and lends them one call at a time. It is safe for concurrent use.
type Pool struct {
	cfg Config

	mu      sync.Mutex
	idle    []*Proc // most recently used last
	procs   map[*Proc]struct{}
	perKey  map[string]int
	freed   chan struct{} // closed (and replaced) when a worker is released
	closed  bool
	started int // workers started, for Stats

	killedMemory, killedOverran atomic.Int64 // for Stats

	stop chan struct{}
	wg   sync.WaitGroup // the monitor and every worker's waiter
}

// New returns a pool; its first Acquire starts the first worker. Close it.
func New(cfg Config) (*Pool, error) {
	cfg = cfg.withDefaults()
	if cfg.Path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox: find this executable: %w", err)
		}
		cfg.Path = exe
	}
	p := &Pool{cfg: cfg, procs: map[*Proc]struct{}{}, perKey: map[string]int{},
		freed: make(chan struct{}), stop: make(chan struct{})}
	p.wg.Add(1)
	go p.monitor()
	return p, nil
}

// MemoryMB is the memory cap of one call.
func (p *Pool) MemoryMB() int { return p.cfg.MemoryMB }

// Grace is how long a worker asked to stop has before it is killed.
func (p *Pool) Grace() time.Duration { return p.cfg.Grace }

// Acquire lends a worker to one call of key (an agent), starting one when none is idle and the
// bounds allow, else waiting for one until ctx ends. nested marks a call made from inside
// another call (a handler's child tool): it is not bound by MaxProcs and MaxPerKey, which the
// outer calls already count. Give the worker back with Release.
func (p *Pool) Acquire(ctx context.Context, key string, nested bool) (*Proc, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		free := nested || p.perKey[key] < p.cfg.MaxPerKey
		if free && len(p.idle) > 0 {
			w := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			p.perKey[key]++
			w.key = key
			w.loan++
			p.mu.Unlock()
			return w, nil
		}
		if free && (nested || len(p.procs) < p.cfg.MaxProcs) {
			w := &Proc{pool: p, key: key, loan: 1, done: make(chan struct{})}
			p.procs[w] = struct{}{} // counted while it starts
			p.perKey[key]++
			p.started++
			p.mu.Unlock()
			if err := w.start(ctx); err != nil {
				p.Release(w, false)
				return nil, err
			}
			return w, nil
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %d of %d started, %d held by this agent (SVC_HANDLER_PROCS): %w",
				ErrBusy, p.count(), p.cfg.MaxProcs, p.held(key), context.Cause(ctx))
		}
	}
}

func (p *Pool) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.procs)
}

func (p *Pool) held(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.perKey[key]
}

// Release gives back a worker Acquire lent. reusable says the call ended cleanly, with the
// worker between calls; otherwise, or when the worker died, it is killed and forgotten.
func (p *Pool) Release(w *Proc, reusable bool) {
	if !reusable || w.exited() {
		w.Kill(nil)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perKey[w.key]--; p.perKey[w.key] <= 0 {
		delete(p.perKey, w.key)
	}
	if reusable && !w.exited() && !p.closed {
		w.lastUsed = time.Now()
		p.idle = append(p.idle, w)
	} else {
		delete(p.procs, w)
	}
	close(p.freed)
	p.freed = make(chan struct{})
}

// Stats are counts of a pool's workers.
type Stats struct {
	Procs   int // workers alive (idle or busy)
	Idle    int
	Started int // workers started since New
	// KilledMemory counts workers that went over the memory cap; KilledOverran those killed
	// because their call did not stop at its deadline.
	KilledMemory, KilledOverran int64
}

// Stats returns the pool's counts now.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Procs: len(p.procs), Idle: len(p.idle), Started: p.started,
		KilledMemory: p.killedMemory.Load(), KilledOverran: p.killedOverran.Load()}
}

// PIDs returns the process ids of the workers alive, for measurements.
func (p *Pool) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for w := range p.procs {
		if pid := w.pid.Load(); pid > 0 {
			out = append(out, int(pid))
		}
	}
	return out
}

// Close kills every worker, idle or busy, and waits for them to exit.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	all := make([]*Proc, 0, len(p.procs))
	for w := range p.procs {
		all = append(all, w)
	}
	p.idle = nil
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
	close(p.stop)
	for _, w := range all {
		w.Kill(ErrClosed)
	}
	p.wg.Wait()
	return nil
}

// monitor kills busy workers whose resident set passed the cap by far (the backstop of the
// workers' own heap watch), and idle ones unused for IdleTimeout, keeping one.
func (p *Pool) monitor() {
	defer p.wg.Done()
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	mib := int64(1) << 20
	limit := (2*int64(p.cfg.MemoryMB)*mib + 64*mib) * raceFactor
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		var busy, stale []*Proc
		idle := make(map[*Proc]bool, len(p.idle))
		for _, w := range p.idle {
			idle[w] = true
		}
		for w := range p.procs {
			if !idle[w] && w.baseRSS.Load() > 0 {
				busy = append(busy, w)
			}
		}
		if len(p.idle) > 1 {
			keep := p.idle[:0]
			for i, w := range p.idle {
				if i < len(p.idle)-1 && time.Since(w.lastUsed) > p.cfg.IdleTimeout {
					stale = append(stale, w)
					delete(p.procs, w)
					continue
				}
				keep = append(keep, w)
			}
			p.idle = keep
		}
		p.mu.Unlock()
		for _, w := range stale {
			w.Kill(nil)
		}
		for _, w := range busy {
			if rss := w.rss(); rss > w.baseRSS.Load()+limit {
				w.Kill(fmt.Errorf("its worker's memory reached %d MiB, over the cap of %d MiB per call (SVC_HANDLER_MEMORY_MB): %w",
					rss>>20, p.cfg.MemoryMB, ErrMemory))
			}
		}
	}
}
