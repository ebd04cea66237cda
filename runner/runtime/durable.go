package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"svc/auth"
	"svc/runner/durable"
	"svc/runner/handlers"
	"svc/runner/models"
	"svc/runner/sse"
	"svc/runner/tools"
)

// Wakeup asks for Runtime.Wake of a run at a time: the end of a sleep, the timeout of a pause,
// or the end of an execution's lease (to resume a run whose executor died).
type Wakeup struct {
	AgentID  string
	DeployID string // the runtime that must take it: the run's deployment
	RunID    string
	At       time.Time
}

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

// lease is how long an execution holds its run.
func (rt *Runtime) lease() time.Duration {
	d := rt.opts.HandlerTimeout
	if d <= 0 {
		d = handlers.DefaultTimeout
	}
	return d + leaseMargin
}

// durableStart is a durable tool as the model sees it: a call starts a run (its own session)
// and executes it until it finishes or parks. A parked run gives the model an asynchronous-start
// result and the client durable_approval_required (spec 3.2, 6.1).
type durableStart struct {
	rt *Runtime
	h  *handlers.Tool
}

// Spec implements tools.Tool.
func (d *durableStart) Spec() models.ToolSpec { return d.h.Spec() }

// Call implements tools.Tool.
func (d *durableStart) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	rt := d.rt
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return tools.Result{}, fmt.Errorf("%w: arguments are not JSON", tools.ErrBadArguments)
	}
	run, err := rt.startRun(ctx, durable.Run{ToolName: d.h.Spec().Name, ParentSessionID: call.Session.ID,
		Owner: call.Session.Owner, ScopeID: call.Session.ScopeID, Input: args, Context: call.Session.Context})
	if err != nil {
		return tools.Result{}, err
	}
	run = rt.execute(ctx, run, call.Host)
	if call.Session.Eval != nil && durable.Parked(run.Status) {
		// An eval never runs a durable tool past its first pause: nobody will answer it.
		cancelled, err := rt.runs.Cancel(ctx, rt.opts.AgentID, run.ID, rt.now().UTC())
		if err == nil {
			rt.publishRun(ctx, cancelled)
			b, _ := json.Marshal(map[string]any{"session_id": run.ID, "status": cancelled.Status, "paused_at": run.Pause.Kind,
				"question": run.Pause.Question, "message": "The run reached its first pause and was cancelled: an eval does not wait for answers."})
			return tools.Result{Content: string(b), Data: b}, nil
		}
	}
	switch run.Status {
	case durable.Completed:
		return resultOf(run.Result), nil
	case durable.Failed:
		return tools.Result{}, errors.New(run.Error)
	case durable.AwaitingInput:
		if call.Host != nil {
			p := run.Pause
			_ = call.Host.Emit(&sse.Frame{Type: sse.TypeDurableApproval, SessionID: run.ID, ToolName: run.ToolName,
				Question: p.Question, Options: p.Options, AllowEdits: p.AllowEdits})
		}
	}
	return asyncStart(run), nil
}

// resultOf is the tool result of a completed run's JSON result.
func resultOf(raw json.RawMessage) tools.Result {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return tools.Result{Content: s}
	}
	if len(raw) == 0 || string(raw) == "null" {
		return tools.Result{}
	}
	return tools.Result{Content: string(raw), Data: raw}
}

// asyncStart is what the model learns of a run that did not finish in the call.
func asyncStart(run durable.Run) tools.Result {
	out := map[string]any{"session_id": run.ID, "status": run.Status}
	switch run.Status {
	case durable.AwaitingInput:
		out["message"] = "Started; the run waits for an answer to: " + run.Pause.Question + " It resumes by itself once answered; do not start it again."
	case durable.Sleeping:
		out["wake_at"] = run.Pause.WakeAt
		out["message"] = "Started; the run sleeps and resumes by itself at wake_at."
	default:
		out["message"] = "Started; the run goes on in the background."
	}
	b, _ := json.Marshal(out) // plain values: cannot fail
	return tools.Result{Content: string(b), Data: b}
}

// startRun creates run (ID, status, attempt and lease set here) and schedules the wake-up that
// resumes it should its executor die.
func (rt *Runtime) startRun(ctx context.Context, run durable.Run) (durable.Run, error) {
	now := rt.now().UTC()
	run.ID = auth.NewID("dur_")
	run.AgentID, run.DeployID = rt.opts.AgentID, rt.opts.DeployID
	run.Status, run.Attempt, run.Executions, run.LeaseUntil = durable.Running, 1, 1, now.Add(rt.lease())
	run.CreatedAt, run.UpdatedAt = now, now
	if err := rt.runs.Create(ctx, run); err != nil {
		return durable.Run{}, fmt.Errorf("start durable run of %s: %w", run.ToolName, err)
	}
	rt.schedule(ctx, run, run.LeaseUntil)
	return run, nil
}

// execute runs one execution of run, which this process claimed (running under run.Attempt),
// on this runtime, and stores its outcome: completed, failed, or parked at a pause (whose
// wake-ups it schedules). It returns the run as it stands afterwards. The execution is not
// cancelled with ctx (a chat whose client left, an answer whose caller hung up): the handler's
// deadline bounds it, and its lease ends it. Past run.LeaseUntil the run may be claimed by
// another execution, so this one's ctx is cancelled (which interrupts its handler), it writes
// no more journal entries and its outcome is dropped: the lease's wake-up resumes the run.
func (rt *Runtime) execute(ctx context.Context, run durable.Run, host tools.Host) durable.Run {
	base := context.WithoutCancel(ctx)
	// The lease's end by this runtime's clock, as a deadline of the real one.
	ctx, cancel := context.WithDeadlineCause(base, time.Now().Add(run.LeaseUntil.Sub(rt.now())), errLeaseEnded)
	defer cancel()
	fence := func() error {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		if !rt.now().Before(run.LeaseUntil) {
			return errLeaseEnded
		}
		return nil
	}
	began := rt.now()
	outcome := "lost"
	defer func() { rt.opts.Metrics.executed(run.ToolName, outcome, rt.now().Sub(began)) }()
	h, err := rt.durableTool(run.ToolName)
	var res tools.Result
	var pause *durable.Pause
	if err == nil {
		res, pause, err = rt.runHandler(ctx, h, run, host, fence)
	}
	if ferr := fence(); ferr != nil {
		rt.log.WarnContext(base, "a durable execution ran past its lease; its outcome is dropped and the run resumes from its journal",
			"run", run.ID, "attempt", run.Attempt, "lease_until", run.LeaseUntil, "outcome_err", err)
		return rt.currentRun(base, run)
	}
	switch {
	case errors.Is(err, durable.ErrStale), errors.Is(err, errExecutionLost):
		// Another executor took the run over; it stores the outcome.
		return rt.currentRun(base, run)
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
	run.UpdatedAt = rt.now().UTC()
	settled, err := rt.runs.Settle(ctx, run)
	if err == nil && rt.opts.Schedule == nil {
		rt.timers.cancel(run.ID + " lease") // the execution ended: nothing to resume
	}
	if err != nil {
		if !errors.Is(err, durable.ErrStale) && fence() == nil {
			rt.log.ErrorContext(base, "store a durable run's outcome", "run", run.ID, "err", err)
		}
		return rt.currentRun(base, run)
	}
	if p := settled.Pause; p != nil {
		if p.WakeAt != nil {
			rt.schedule(base, settled, *p.WakeAt)
		}
		if p.ExpiresAt != nil {
			rt.schedule(base, settled, *p.ExpiresAt)
		}
	}
	outcome = settled.Status
	rt.publishRun(base, settled)
	return settled
}

// errExecutionLost ends an execution whose journal could not be read.
var errExecutionLost = errors.New("durable run left to its next wake-up")

// runHandler replays the run's journal through its handler; fence refuses the journal's writes
// once the execution's lease ended.
func (rt *Runtime) runHandler(ctx context.Context, h *handlers.Tool, run durable.Run, host tools.Host, fence func() error) (tools.Result, *durable.Pause, error) {
	entries, err := rt.runs.Journal(ctx, run.ID)
	if err != nil {
		rt.log.ErrorContext(ctx, "read a durable run's journal", "run", run.ID, "err", err)
		return tools.Result{}, nil, errExecutionLost
	}
	recorded := make(map[string]json.RawMessage, len(entries))
	for _, e := range entries {
		recorded[e.Key] = e.Value
	}
	w := newJournalWriter(ctx, rt.runs, run, fence)
	j := &handlers.Journal{Recorded: recorded, Now: rt.now, Flush: w.Flush,
		Record: func(ctx context.Context, key string, value json.RawMessage) error {
			return w.Record(ctx, key, value, durable.Entry{At: rt.now().UTC()})
		}}
	call := tools.Call{ID: run.ID, Arguments: run.Input, Host: host,
		Session: tools.Session{ID: run.ID, Owner: run.Owner, ScopeID: run.ScopeID, Context: run.Context}}
	res, pause, err := h.RunDurable(ctx, call, j)
	if ferr := w.Close(ctx); ferr != nil && (err == nil || errors.Is(ferr, durable.ErrStale)) {
		return tools.Result{}, nil, ferr // the outcome must not be stored before what led to it
	}
	return res, pause, err
}

// durableTool is the handler of the named durable tool of this runtime's agent.
func (rt *Runtime) durableTool(name string) (*handlers.Tool, error) {
	t := rt.ag.Tools[name]
	if t == nil || !t.Durable() {
		return nil, fmt.Errorf("the agent of deployment %s has no durable tool %s", rt.opts.DeployID, name)
	}
	return rt.durableHandler(t)
}

// currentRun reads run again, or returns it as it was when it cannot be read.
func (rt *Runtime) currentRun(ctx context.Context, run durable.Run) durable.Run {
	got, err := rt.runs.Get(ctx, rt.opts.AgentID, run.ID)
	if err != nil {
		return run
	}
	return got
}

// runtimeOf is the runtime that executes run: this one, or the runtime of the run's deployment.
func (rt *Runtime) runtimeOf(ctx context.Context, run durable.Run) (*Runtime, error) {
	if run.DeployID == rt.opts.DeployID || rt.opts.Elsewhere == nil {
		return rt, nil
	}
	return rt.opts.Elsewhere(ctx, run.DeployID)
}

// resumeRun executes a run this process just claimed, on the runtime of its deployment.
func (rt *Runtime) resumeRun(ctx context.Context, run durable.Run) durable.Run {
	target := rt.resumeOn(ctx, run)
	if target == nil {
		return run
	}
	return target.execute(ctx, run, nil)
}

// resumeInBackground executes a run this process just claimed as resumeRun does, in a goroutine
// of the runtime that executes it, whose Close waits for it. A runtime that is closing executes
// nothing: the run then resumes at its lease's wake-up.
func (rt *Runtime) resumeInBackground(ctx context.Context, run durable.Run) {
	target := rt.resumeOn(ctx, run)
	if target == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if !target.executions.start(func() { target.execute(ctx, run, nil) }) {
		rt.log.WarnContext(ctx, "the runtime is closing: the durable run resumes at its lease's wake-up", "run", run.ID, "lease_until", run.LeaseUntil)
	}
}

// resumeOn schedules the wake-up that resumes a run this process just claimed should its
// execution die, and returns the runtime of its deployment; nil when that cannot be loaded (the
// wake-up resumes the run then).
func (rt *Runtime) resumeOn(ctx context.Context, run durable.Run) *Runtime {
	rt.schedule(ctx, run, run.LeaseUntil)
	target, err := rt.runtimeOf(ctx, run)
	if err != nil {
		rt.log.ErrorContext(ctx, "load the deployment of a durable run; it resumes at its next wake-up", "run", run.ID, "deploy_id", run.DeployID, "err", err)
		return nil
	}
	return target
}

// Wake does what is due for a run (a Wakeup): ends its sleep, applies its pause's timeout, or
// resumes it when its executor died; it does nothing for a run that ended, and schedules itself
// again when woken early.
func (rt *Runtime) Wake(ctx context.Context, runID string) error {
	run, err := rt.runs.Get(ctx, rt.opts.AgentID, runID)
	if errors.Is(err, durable.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	now := rt.now().UTC()
	switch p := run.Pause; {
	case durable.Ended(run.Status):
		return nil
	case run.Status == durable.Sleeping && p != nil && p.WakeAt != nil:
		if now.Before(*p.WakeAt) {
			rt.schedule(ctx, run, *p.WakeAt)
			return nil
		}
		woke, _ := json.Marshal(map[string]any{"woke_at": now})
		return rt.answerAndResume(ctx, run, woke, "", now)
	case run.Status == durable.AwaitingInput && p != nil && p.ExpiresAt != nil:
		if now.Before(*p.ExpiresAt) {
			rt.schedule(ctx, run, *p.ExpiresAt)
			return nil
		}
		return rt.expire(ctx, run, now)
	case run.Status == durable.Running:
		if now.Before(run.LeaseUntil) {
			rt.schedule(ctx, run, run.LeaseUntil)
			return nil
		}
		// The claim fences the last execution off: whatever it still writes is refused.
		claimed, err := rt.runs.Claim(ctx, rt.opts.AgentID, run.ID, nil, now, now.Add(rt.lease()))
		if errors.Is(err, durable.ErrStale) {
			return nil
		}
		if err != nil {
			return err
		}
		if claimed.Executions > MaxExecutions {
			return rt.giveUp(ctx, claimed)
		}
		rt.log.InfoContext(ctx, "resume a durable run whose last execution did not finish in its lease", "run", run.ID, "attempt", claimed.Attempt)
		rt.resumeRun(ctx, claimed)
	}
	return nil
}

// giveUp fails a run, claimed from a lapsed lease, whose last MaxExecutions executions all
// ended without storing an outcome, instead of resuming it once more.
func (rt *Runtime) giveUp(ctx context.Context, run durable.Run) error {
	run.Status, run.Pause, run.Result = durable.Failed, nil, nil
	run.Error = fmt.Sprintf("gave up after %d executions that did not finish: each ran past its lease of %s without storing an outcome "+
		"(its handler overran its deadline, SVC_HANDLER_TIMEOUT, or its process stopped)", run.Executions-1, rt.lease())
	run.UpdatedAt = rt.now().UTC()
	settled, err := rt.runs.Settle(ctx, run)
	if errors.Is(err, durable.ErrStale) {
		return nil
	}
	if err != nil {
		return err
	}
	rt.log.WarnContext(ctx, "a durable run failed: its executions kept running past their lease", "run", run.ID, "executions", run.Executions-1)
	rt.publishRun(ctx, settled)
	return nil
}

// expire applies the timeout of a pause nobody answered in time (its onTimeout): deny, a
// default answer, or the question escalated to other answerers with a timeout of its own.
func (rt *Runtime) expire(ctx context.Context, run durable.Run, now time.Time) error {
	p := run.Pause
	ot := handlers.OnTimeout{Action: handlers.TimeoutDeny}
	if len(p.OnTimeout) > 0 {
		if err := json.Unmarshal(p.OnTimeout, &ot); err != nil {
			return fmt.Errorf("durable run %s: onTimeout: %w", run.ID, err)
		}
	}
	if ot.Action == handlers.TimeoutEscalate {
		claimed, err := rt.runs.Claim(ctx, rt.opts.AgentID, run.ID, []string{durable.AwaitingInput}, now, now.Add(rt.lease()))
		if errors.Is(err, durable.ErrStale) {
			return nil
		}
		if err != nil {
			return err
		}
		note, _ := json.Marshal(map[string]any{"escalated_to": ot.To, "at": now})
		if err := rt.runs.Record(ctx, run.ID, claimed.Attempt, durable.Entry{Key: p.Key + "~escalated", Value: note, At: now}); err != nil && !errors.Is(err, durable.ErrRecorded) {
			return err
		}
		next := *p
		next.EligibleAnswerers = ot.To
		wait := time.Duration(ot.TimeoutMS) * time.Millisecond
		if wait <= 0 {
			wait = p.ExpiresAt.Sub(run.UpdatedAt)
		}
		at := now.Add(max(wait, time.Second))
		next.ExpiresAt = &at
		next.OnTimeout, _ = json.Marshal(handlers.OnTimeout{Action: handlers.TimeoutDeny}) // plain fields
		claimed.Status, claimed.Pause, claimed.UpdatedAt = durable.AwaitingInput, &next, now
		settled, err := rt.runs.Settle(ctx, claimed)
		if err != nil {
			return err
		}
		rt.schedule(ctx, settled, at)
		rt.publishRun(ctx, settled)
		return nil
	}
	answer := map[string]any{"respondedBy": "timeout", "timedOut": true}
	switch {
	case p.Kind == durable.PauseApproval && ot.Action == handlers.TimeoutDefault:
		var approved bool
		_ = json.Unmarshal(ot.Value, &approved) // anything but true denies
		answer["approved"] = approved
	case p.Kind == durable.PauseApproval:
		answer["approved"] = false
	case ot.Action == handlers.TimeoutDefault:
		answer["value"] = ot.Value
	default:
		answer["value"] = nil
	}
	value, _ := json.Marshal(answer) // plain values: cannot fail
	return rt.answerAndResume(ctx, run, value, "timeout", now)
}

// answerAndResume records value as the answer to run's pause (a wake-up's or a timeout's) and
// resumes the run; a run that moved on meanwhile is left alone.
func (rt *Runtime) answerAndResume(ctx context.Context, run durable.Run, value json.RawMessage, by string, now time.Time) error {
	claimed, err := rt.runs.Answer(ctx, rt.opts.AgentID, run.ID, run.Pause.Key, value, by, now, now.Add(rt.lease()))
	if errors.Is(err, durable.ErrStale) {
		return nil
	}
	if err != nil {
		return err
	}
	rt.publishRun(ctx, claimed)
	rt.resumeRun(ctx, claimed)
	return nil
}

// schedule asks for a Wake of run at at: through Options.Schedule (the queue), or a timer of
// this process. A failure is logged: the run then waits for an answer, or a restart's sweep.
func (rt *Runtime) schedule(ctx context.Context, run durable.Run, at time.Time) {
	w := Wakeup{AgentID: run.AgentID, DeployID: run.DeployID, RunID: run.ID, At: at.UTC()}
	if rt.opts.Schedule != nil {
		if err := rt.opts.Schedule(context.WithoutCancel(ctx), w); err != nil {
			rt.log.ErrorContext(ctx, "schedule a durable run's wake-up", "run", run.ID, "at", at, "err", err)
		}
		return
	}
	key := run.ID + " " + at.UTC().Format(time.RFC3339Nano)
	if at.Equal(run.LeaseUntil) {
		key = run.ID + " lease" // one per run: a new execution's replaces the last one's
	}
	rt.timers.after(key, at.Sub(rt.now()), func() {
		if err := rt.Wake(context.Background(), w.RunID); err != nil {
			rt.log.Error("wake a durable run", "run", w.RunID, "err", err)
		}
	})
}

// publishRun tells GET /api/events subscribers of every runtime of the agent that run changed.
func (rt *Runtime) publishRun(ctx context.Context, run durable.Run) {
	f := &sse.Frame{Type: sse.TypeSessionUpdated, SessionID: run.ID, Status: run.Status, ToolName: run.ToolName}
	if rt.opts.Events == nil {
		rt.bus.publish(f)
		return
	}
	if err := rt.opts.Events.Publish(context.WithoutCancel(ctx), rt.opts.AgentID, f); err != nil {
		rt.log.WarnContext(ctx, "publish session_updated", "run", run.ID, "err", err)
	}
}
