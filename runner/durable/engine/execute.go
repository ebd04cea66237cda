package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"svc/agent"
	"time"

	"svc/auth"
	"svc/runner/durable"
	"svc/runner/handlers"
	"svc/runner/tools"
)

// leaseMargin is how long past its handler's deadline an execution may take to store its
// outcome before its run counts as abandoned.
const leaseMargin = 5 * time.Second

// MaxExecutions is how many executions of a run in a row may end without storing an outcome
// (each ran past its lease, or its process stopped, and the lease's wake-up resumed the run)
// before the run fails instead of resuming once more.
const MaxExecutions = 5

// errLeaseEnded ends an execution whose lease ended before it stored its outcome: from then on
// another execution may claim the run, so this one is interrupted and writes nothing more.
var errLeaseEnded = errors.New("durable execution ran past its lease")

// errExecutionLost ends an execution whose journal could not be read.
var errExecutionLost = errors.New("durable run left to its next wake-up")

// lease is how long an execution holds its run.
func (e *Engine) lease() time.Duration {
	d := e.cfg.HandlerTimeout
	if d <= 0 {
		d = handlers.DefaultTimeout
	}
	return d + leaseMargin
}

// StartRun starts a run of run.ToolName on the deployment run.DeployID of run.AgentID (which
// must be attached or loadable), with run's ParentSessionID, Owner, ScopeID, Input and Context
// (and run.ID when set, else a new one), and executes it until it finishes or parks; host, when not nil, receives the handler's frames.
// It returns the run as it stands then: an execution interrupted by Shutdown leaves it running,
// to resume at its lease's wake-up. The execution is not cancelled with ctx (a chat whose client
// left): the handler's deadline bounds it.
func (e *Engine) StartRun(ctx context.Context, run durable.Run, host tools.Host) (durable.Run, error) {
	x, err := e.begin(ctx, run.AgentID, run.DeployID)
	if err != nil {
		return durable.Run{}, fmt.Errorf("start durable run of %s: %w", run.ToolName, err)
	}
	defer x.done()
	now := e.now().UTC()
	if run.ID == "" {
		run.ID = auth.NewID("dur_")
	}
	run.Status, run.Attempt, run.Executions, run.LeaseUntil = durable.Running, 1, 1, now.Add(e.lease())
	run.CreatedAt, run.UpdatedAt = now, now
	if err := e.runs.Create(ctx, run); err != nil {
		return durable.Run{}, fmt.Errorf("start durable run of %s: %w", run.ToolName, err)
	}
	e.schedule(ctx, run, run.LeaseUntil)
	return e.execute(ctx, x, run, host), nil
}

// Answer records value, by by, as the answer to the pause run waits at and claims the run, then
// resumes it in the background (on its deployment) and returns the claimed run, running. The
// caller checked that by may answer and that value answers the pause. durable.ErrStale or
// durable.ErrRecorded, with the run as it stands, when the run no longer waits there.
func (e *Engine) Answer(ctx context.Context, run durable.Run, value json.RawMessage, by string) (durable.Run, error) {
	if run.Pause == nil {
		return run, fmt.Errorf("%w: %s waits for no answer", durable.ErrStale, run.ID)
	}
	now := e.now().UTC()
	claimed, err := e.runs.Answer(ctx, run.AgentID, run.ID, run.Pause.Key, value, by, now, now.Add(e.lease()))
	if err != nil {
		return claimed, err
	}
	e.publish(ctx, claimed)
	e.resumeInBackground(ctx, claimed)
	return claimed, nil
}

// Cancel cancels the run id of agentID unless it has ended, and publishes the change.
// durable.ErrStale, with the run, when it has ended.
func (e *Engine) Cancel(ctx context.Context, agentID, id string) (durable.Run, error) {
	cancelled, err := e.runs.Cancel(ctx, agentID, id, e.now().UTC())
	if err != nil {
		return cancelled, err
	}
	e.publish(ctx, cancelled)
	return cancelled, nil
}

// execute runs one execution of run, which this process claimed (running under run.Attempt),
// on the deployment x holds, and stores its outcome: completed, failed, or parked at a pause
// (whose wake-ups it schedules). It returns the run as it stands afterwards. The execution is
// not cancelled with ctx: the handler's deadline bounds it, and its lease ends it. Past
// run.LeaseUntil the run may be claimed by another execution, so this one's ctx is cancelled
// (which interrupts its handler), it writes no more journal entries and its outcome is dropped:
// the lease's wake-up resumes the run. An interrupt (Shutdown, detach) does the same.
func (e *Engine) execute(ctx context.Context, x *execution, run durable.Run, host tools.Host) durable.Run {
	base := context.WithoutCancel(ctx)
	// The lease's end by the engine's clock, as a deadline of the real one.
	ctx, cancel := context.WithDeadlineCause(x.ctx, time.Now().Add(run.LeaseUntil.Sub(e.now())), errLeaseEnded)
	defer cancel()
	fence := func() error {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		if !e.now().Before(run.LeaseUntil) {
			return errLeaseEnded
		}
		return nil
	}
	began := e.now()
	outcome := "lost"
	if m := e.cfg.Metrics; m != nil {
		defer func() { m.DurableExecuted(run.ToolName, outcome, e.now().Sub(began)) }()
	}
	h, err := x.att.Tool(run.ToolName)
	var res tools.Result
	var pause *durable.Pause
	if err == nil {
		res, pause, err = e.runHandler(ctx, h, run, host, fence)
	}
	if ferr := fence(); ferr != nil {
		e.log.WarnContext(base, "a durable execution ended before storing its outcome (its lease ended, or it was interrupted); the outcome is dropped and the run resumes from its journal",
			"run", run.ID, "attempt", run.Attempt, "lease_until", run.LeaseUntil, "cause", ferr, "outcome_err", err)
		return e.currentRun(base, run)
	}
	switch {
	case errors.Is(err, durable.ErrStale), errors.Is(err, errExecutionLost):
		// Another executor took the run over; it stores the outcome.
		return e.currentRun(base, run)
	case err != nil:
		run.Status, run.Error, run.Pause = durable.Failed, err.Error(), nil
	case pause != nil:
		run.Status, run.Pause = durable.AwaitingInput, pause
		if pause.Kind == durable.PauseSleep {
			run.Status = durable.Sleeping
		}
	default:
		run.Status, run.Pause = durable.Completed, nil
		run.Result = res.Data
		if len(run.Result) == 0 {
			run.Result, _ = json.Marshal(res.Content) // a string: cannot fail
		}
	}
	run.UpdatedAt = e.now().UTC()
	settled, err := e.runs.Settle(ctx, run)
	if err == nil && e.cfg.Schedule == nil {
		e.timers.cancel(run.ID + " lease") // the execution ended: nothing to resume
	}
	if err != nil {
		if !errors.Is(err, durable.ErrStale) && fence() == nil {
			e.log.ErrorContext(base, "store a durable run's outcome", "run", run.ID, "err", err)
		}
		return e.currentRun(base, run)
	}
	if p := settled.Pause; p != nil {
		if p.WakeAt != nil {
			e.schedule(base, settled, *p.WakeAt)
		}
		if p.ExpiresAt != nil {
			e.schedule(base, settled, *p.ExpiresAt)
		}
	}
	outcome = settled.Status
	e.publish(base, settled)
	return settled
}

// runHandler replays the run's journal through its handler; fence refuses the journal's writes
// once the execution's lease ended.
func (e *Engine) runHandler(ctx context.Context, h *handlers.Tool, run durable.Run, host tools.Host, fence func() error) (tools.Result, *durable.Pause, error) {
	entries, err := e.runs.Journal(ctx, run.ID)
	if err != nil {
		e.log.ErrorContext(ctx, "read a durable run's journal", "run", run.ID, "err", err)
		return tools.Result{}, nil, errExecutionLost
	}
	recorded := make(map[string]json.RawMessage, len(entries))
	for _, en := range entries {
		recorded[en.Key] = en.Value
	}
	w := newJournalWriter(ctx, e.runs, run, fence)
	j := &handlers.Journal{Recorded: recorded, Now: e.now, Flush: w.Flush,
		Record: func(ctx context.Context, key string, value json.RawMessage) error {
			return w.Record(ctx, key, value, durable.Entry{At: e.now().UTC()})
		}}
	call := tools.Call{ID: run.ID, Arguments: run.Input, Host: host,
		Session: tools.Session{ID: run.ID, Owner: run.Owner, ScopeID: run.ScopeID, Context: run.Context,
			Model: agent.ModelRef{Provider: run.Model.Provider, Model: run.Model.Model, Effort: run.Model.Effort}}}
	res, pause, err := h.RunDurable(ctx, call, j)
	if ferr := w.Close(ctx); ferr != nil && (err == nil || errors.Is(ferr, durable.ErrStale)) {
		return tools.Result{}, nil, ferr // the outcome must not be stored before what led to it
	}
	return res, pause, err
}

// currentRun reads run again, or returns it as it was when it cannot be read.
func (e *Engine) currentRun(ctx context.Context, run durable.Run) durable.Run {
	got, err := e.runs.Get(ctx, run.AgentID, run.ID)
	if err != nil {
		return run
	}
	return got
}

// resume executes a run this process just claimed, on its deployment, and returns it as it
// stands afterwards.
func (e *Engine) resume(ctx context.Context, run durable.Run) durable.Run {
	x := e.resumeOn(ctx, run)
	if x == nil {
		return run
	}
	defer x.done()
	return e.execute(ctx, x, run, nil)
}

// resumeInBackground executes a run this process just claimed as resume does, in a goroutine
// that the detach of its deployment (and Shutdown) waits for. A deployment that is detaching, or
// an engine shutting down, executes nothing: the run then resumes at its lease's wake-up.
func (e *Engine) resumeInBackground(ctx context.Context, run durable.Run) {
	x := e.resumeOn(ctx, run)
	if x == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer x.done()
		e.execute(ctx, x, run, nil)
	}()
}

// resumeOn schedules the wake-up that resumes a run this process just claimed should its
// execution die, and holds its deployment for the execution; nil when it cannot (the wake-up
// resumes the run then).
func (e *Engine) resumeOn(ctx context.Context, run durable.Run) *execution {
	e.schedule(ctx, run, run.LeaseUntil)
	x, err := e.begin(ctx, run.AgentID, run.DeployID)
	if err != nil {
		e.log.WarnContext(ctx, "a durable run cannot execute now; it resumes at its lease's wake-up", "run", run.ID, "deploy_id", run.DeployID, "lease_until", run.LeaseUntil, "err", err)
		return nil
	}
	return x
}
