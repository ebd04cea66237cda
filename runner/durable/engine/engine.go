package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"svc/runner/durable"
	"svc/runner/handlers"
	"svc/runner/sse"
)

// Errors of an Engine.
var (
	// ErrShutdown: the engine (or the deployment's attachment) stopped taking executions. A
	// run interrupted by it resumes from its journal at its lease's wake-up.
	ErrShutdown = errors.New("engine: shut down")
	// ErrNotAttached: no deployment of that id is attached, and none could be loaded.
	ErrNotAttached = errors.New("engine: deployment not attached")
)

// Wakeup asks for a Wake of a run at a time: the end of a sleep, the timeout of a pause, or the
// end of an execution's lease (to resume a run whose executor died).
type Wakeup struct {
	AgentID  string
	DeployID string // the deployment whose bundle executes the run
	RunID    string
	At       time.Time
}

// Publisher carries a session_updated frame to the /api/events subscribers of every runtime of
// an agent (events.Bus implements it). Publish may be called from any goroutine.
type Publisher interface {
	Publish(ctx context.Context, agentID string, f *sse.Frame) error
}

// Observer is told of each execution of a run: its durable tool, its outcome (completed, failed,
// awaiting-input, sleeping, lost) and how long it took (runtime.Metrics implements it).
type Observer interface {
	DurableExecuted(tool, outcome string, d time.Duration)
}

// Config configures an Engine. Zero values are documented defaults.
type Config struct {
	// Store keeps the runs and their journals; nil means memory (svc dev): runs are lost with
	// the process.
	Store durable.Store
	// Schedule asks for a Wake of a run at a time (the platform enqueues a task whose handler
	// calls Wake, on whichever process takes it); nil means a timer of this process.
	Schedule func(ctx context.Context, w Wakeup) error
	// Events carries session_updated to the subscribers of every runtime of the run's agent;
	// nil means the Notify of the agent's deployments attached to this engine.
	Events Publisher
	// Metrics is told of every execution; nil tells nobody.
	Metrics Observer
	// HandlerTimeout is the deadline of a handler's execution (SVC_HANDLER_TIMEOUT); with a
	// margin it is the lease of an execution. 0 means handlers.DefaultTimeout.
	HandlerTimeout time.Duration
	// Logger receives the engine's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests move it past leases and timeouts.
	Now func() time.Time
}

// Deployment is what the engine needs of a deployment to execute its runs.
type Deployment struct {
	AgentID  string // "" under svc dev
	DeployID string
	// Tool returns the compiled handler of the named durable tool of the deployment's agent, or
	// an error when the agent has none. Required.
	Tool func(name string) (*handlers.Tool, error)
	// Notify, when set, delivers a session_updated frame to the deployment's own subscribers;
	// the engine calls it when it has no Events.
	Notify func(f *sse.Frame)
}

// Engine starts, executes, resumes, wakes, expires and publishes durable runs. Its methods are
// safe for concurrent use. Create it with New, Start it, and Shutdown it.
type Engine struct {
	cfg    Config
	runs   durable.Store
	log    *slog.Logger
	now    func() time.Time
	timers timers // the wake-ups without a Schedule

	mu       sync.Mutex
	state    int                                              // stateNew, stateStarted, stateShutdown
	load     func(ctx context.Context, deployID string) error // from Start; nil loads nothing
	attached []*attachment                                    // newest last
}

const (
	stateNew = iota
	stateStarted
	stateShutdown
)

// New returns an engine of cfg. It holds no goroutine until it has work.
func New(cfg Config) *Engine {
	e := &Engine{cfg: cfg, runs: cfg.Store, log: cfg.Logger, now: cfg.Now}
	if e.runs == nil {
		e.runs = &durable.Memory{}
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.now = time.Now
	}
	return e
}

// Start lets the engine load the deployments of runs it must resume that are not attached:
// load(ctx, deployID) attaches the deployment (the router loads its runtime, which attaches
// itself) or fails. load may be nil: then only attached deployments execute runs. Start is
// called once, before Shutdown.
func (e *Engine) Start(load func(ctx context.Context, deployID string) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != stateNew {
		return errors.New("engine: Start called twice, or after Shutdown")
	}
	e.state, e.load = stateStarted, load
	return nil
}

// Shutdown stops the wake-up timers and takes no more executions, then waits for those in flight.
// When ctx ends first it interrupts them (they store no outcome, and their runs resume from
// their journals at their leases' wake-ups), waits for them to return, and reports ctx's cause.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	if e.state == stateShutdown {
		e.mu.Unlock()
		return nil
	}
	e.state = stateShutdown
	atts := slices.Clone(e.attached)
	e.mu.Unlock()
	for _, a := range atts {
		a.close()
	}
	return drain(ctx, atts, func() {
		e.timers.stop()
		for _, a := range atts {
			a.wg.Wait()
		}
	})
}

// Attach makes d execute the runs of its deployment, until detach. detach takes no more
// executions on d and waits for those in flight as Shutdown does, within ctx. Attaching a
// deployment again (a runtime replaced while the old one closes) makes the newer one run it.
func (e *Engine) Attach(d Deployment) (detach func(ctx context.Context) error) {
	a := &attachment{Deployment: d, running: map[uint64]context.CancelCauseFunc{}}
	e.mu.Lock()
	if e.state == stateShutdown {
		a.closed = true
	}
	e.attached = append(e.attached, a)
	e.mu.Unlock()
	return func(ctx context.Context) error {
		// Closed, a stays attached while its executions finish: they still publish through it.
		a.close()
		err := drain(ctx, []*attachment{a}, a.wg.Wait)
		e.mu.Lock()
		e.attached = slices.DeleteFunc(e.attached, func(x *attachment) bool { return x == a })
		e.mu.Unlock()
		return err
	}
}

// drain runs wait until it returns or ctx ends; then it interrupts the executions of atts, which
// take no new ones, and waits for wait to return.
func drain(ctx context.Context, atts []*attachment, wait func()) error {
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, a := range atts {
		a.interrupt()
	}
	<-done
	return fmt.Errorf("engine: durable executions interrupted, to resume from their journals: %w", context.Cause(ctx))
}

// attachment is an attached deployment and the executions running on it.
type attachment struct {
	Deployment
	mu      sync.Mutex
	closed  bool
	next    uint64
	running map[uint64]context.CancelCauseFunc
	wg      sync.WaitGroup
}

// execution is one execution's hold on its deployment: ctx ends when the execution is
// interrupted, and done releases the hold.
type execution struct {
	att  *attachment
	ctx  context.Context
	done func()
}

// begin holds a for an execution, unless it is closed. The execution's ctx keeps parent's values
// but not its cancellation: only an interrupt ends it.
func (a *attachment) begin(parent context.Context) *execution {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	id := a.next
	a.next++
	a.running[id] = cancel
	a.wg.Add(1)
	return &execution{att: a, ctx: ctx, done: func() {
		a.mu.Lock()
		delete(a.running, id)
		a.mu.Unlock()
		cancel(nil)
		a.wg.Done()
	}}
}

func (a *attachment) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
}

// interrupt ends the ctx of every execution in flight with ErrShutdown.
func (a *attachment) interrupt() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, cancel := range a.running {
		cancel(ErrShutdown)
	}
}

// begin holds the deployment of agentID and deployID for an execution: the newest attached,
// else the one the Start loader attaches.
func (e *Engine) begin(ctx context.Context, agentID, deployID string) (*execution, error) {
	if x := e.attachedBegin(ctx, agentID, deployID); x != nil {
		return x, nil
	}
	e.mu.Lock()
	state, load := e.state, e.load
	e.mu.Unlock()
	switch {
	case state == stateShutdown:
		return nil, ErrShutdown
	case load == nil:
		return nil, fmt.Errorf("%w: %s", ErrNotAttached, deployID)
	}
	if err := load(ctx, deployID); err != nil {
		return nil, fmt.Errorf("load deployment %s: %w", deployID, err)
	}
	if x := e.attachedBegin(ctx, agentID, deployID); x != nil {
		return x, nil
	}
	return nil, fmt.Errorf("%w: %s (loaded, then closed)", ErrNotAttached, deployID)
}

func (e *Engine) attachedBegin(ctx context.Context, agentID, deployID string) *execution {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range slices.Backward(e.attached) {
		if a.AgentID == agentID && a.DeployID == deployID {
			if x := a.begin(ctx); x != nil {
				return x
			}
		}
	}
	return nil
}

// Get returns the run id of agentID; durable.ErrNotFound when there is none.
func (e *Engine) Get(ctx context.Context, agentID, id string) (durable.Run, error) {
	return e.runs.Get(ctx, agentID, id)
}

// List returns the runs of the filter, newest first.
func (e *Engine) List(ctx context.Context, f durable.Filter) ([]durable.Run, error) {
	return e.runs.List(ctx, f)
}

// publish tells the /api/events subscribers of every runtime of the run's agent that run changed.
func (e *Engine) publish(ctx context.Context, run durable.Run) {
	f := &sse.Frame{Type: sse.TypeSessionUpdated, SessionID: run.ID, Status: run.Status, ToolName: run.ToolName}
	if e.cfg.Events != nil {
		if err := e.cfg.Events.Publish(context.WithoutCancel(ctx), run.AgentID, f); err != nil {
			e.log.WarnContext(ctx, "publish session_updated", "run", run.ID, "err", err)
		}
		return
	}
	e.mu.Lock()
	var notify []func(*sse.Frame)
	for _, a := range e.attached {
		if a.AgentID == run.AgentID && a.Notify != nil {
			notify = append(notify, a.Notify)
		}
	}
	e.mu.Unlock()
	for _, n := range notify {
		c := *f
		n(&c)
	}
}
