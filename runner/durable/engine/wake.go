package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"svc/runner/durable"
	"svc/runner/handlers"
)

// Wake does what is due for the run id of agentID (a Wakeup): ends its sleep, applies its
// pause's timeout, or resumes it when its executor died; it does nothing for a run that ended or
// does not exist, and schedules itself again when woken early. A resume executes before Wake
// returns. An error is worth retrying: the store failed, or the engine is shut down (ErrShutdown;
// the run is left as it was, for another process's engine).
func (e *Engine) Wake(ctx context.Context, agentID, id string) error {
	e.mu.Lock()
	down := e.state == stateShutdown
	e.mu.Unlock()
	if down {
		return ErrShutdown
	}
	run, err := e.runs.Get(ctx, agentID, id)
	if errors.Is(err, durable.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	now := e.now().UTC()
	switch p := run.Pause; {
	case durable.Ended(run.Status):
		return nil
	case run.Status == durable.Sleeping && p != nil && p.WakeAt != nil:
		if now.Before(*p.WakeAt) {
			e.schedule(ctx, run, *p.WakeAt)
			return nil
		}
		woke, _ := json.Marshal(map[string]any{"woke_at": now})
		return e.answerAndResume(ctx, run, woke, "", now)
	case run.Status == durable.AwaitingInput && p != nil && p.ExpiresAt != nil:
		if now.Before(*p.ExpiresAt) {
			e.schedule(ctx, run, *p.ExpiresAt)
			return nil
		}
		return e.expire(ctx, run, now)
	case run.Status == durable.Running:
		if now.Before(run.LeaseUntil) {
			e.schedule(ctx, run, run.LeaseUntil)
			return nil
		}
		// The claim fences the last execution off: whatever it still writes is refused.
		claimed, err := e.runs.Claim(ctx, agentID, run.ID, nil, now, now.Add(e.lease()))
		if errors.Is(err, durable.ErrStale) {
			return nil
		}
		if err != nil {
			return err
		}
		if claimed.Executions > MaxExecutions {
			return e.giveUp(ctx, claimed)
		}
		e.log.InfoContext(ctx, "resume a durable run whose last execution did not finish in its lease", "run", run.ID, "attempt", claimed.Attempt)
		e.resume(ctx, claimed)
	}
	return nil
}

// giveUp fails a run, claimed from a lapsed lease, whose last MaxExecutions executions all
// ended without storing an outcome, instead of resuming it once more.
func (e *Engine) giveUp(ctx context.Context, run durable.Run) error {
	run.Status, run.Pause, run.Result = durable.Failed, nil, nil
	run.Error = fmt.Sprintf("gave up after %d executions that did not finish: each ran past its lease of %s without storing an outcome "+
		"(its handler overran its deadline, SVC_HANDLER_TIMEOUT, or its process stopped)", run.Executions-1, e.lease())
	run.UpdatedAt = e.now().UTC()
	settled, err := e.runs.Settle(ctx, run)
	if errors.Is(err, durable.ErrStale) {
		return nil
	}
	if err != nil {
		return err
	}
	e.log.WarnContext(ctx, "a durable run failed: its executions kept running past their lease", "run", run.ID, "executions", run.Executions-1)
	e.publish(ctx, settled)
	return nil
}

// expire applies the timeout of a pause nobody answered in time (its onTimeout): deny, a
// default answer, or the question escalated to other answerers with a timeout of its own.
func (e *Engine) expire(ctx context.Context, run durable.Run, now time.Time) error {
	p := run.Pause
	ot := handlers.OnTimeout{Action: handlers.TimeoutDeny}
	if len(p.OnTimeout) > 0 {
		if err := json.Unmarshal(p.OnTimeout, &ot); err != nil {
			return fmt.Errorf("durable run %s: onTimeout: %w", run.ID, err)
		}
	}
	if ot.Action == handlers.TimeoutEscalate {
		return e.escalate(ctx, run, ot, now)
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
	return e.answerAndResume(ctx, run, value, "timeout", now)
}

// escalate puts the question of an expired pause to ot.To, with a timeout of its own that denies.
func (e *Engine) escalate(ctx context.Context, run durable.Run, ot handlers.OnTimeout, now time.Time) error {
	p := run.Pause
	claimed, err := e.runs.Claim(ctx, run.AgentID, run.ID, []string{durable.AwaitingInput}, now, now.Add(e.lease()))
	if errors.Is(err, durable.ErrStale) {
		return nil
	}
	if err != nil {
		return err
	}
	note, _ := json.Marshal(map[string]any{"escalated_to": ot.To, "at": now})
	if err := e.runs.Record(ctx, run.ID, claimed.Attempt, durable.Entry{Key: p.Key + "~escalated", Value: note, At: now}); err != nil && !errors.Is(err, durable.ErrRecorded) {
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
	settled, err := e.runs.Settle(ctx, claimed)
	if err != nil {
		return err
	}
	e.schedule(ctx, settled, at)
	e.publish(ctx, settled)
	return nil
}

// answerAndResume records value as the answer to run's pause (a wake-up's or a timeout's) and
// resumes the run; a run that moved on meanwhile is left alone.
func (e *Engine) answerAndResume(ctx context.Context, run durable.Run, value json.RawMessage, by string, now time.Time) error {
	claimed, err := e.runs.Answer(ctx, run.AgentID, run.ID, run.Pause.Key, value, by, now, now.Add(e.lease()))
	if errors.Is(err, durable.ErrStale) {
		return nil
	}
	if err != nil {
		return err
	}
	e.publish(ctx, claimed)
	e.resume(ctx, claimed)
	return nil
}

// schedule asks for a Wake of run at at: through Config.Schedule (the queue), or a timer of this
// process. A failure is logged: the run then waits for an answer, or a restart's sweep.
func (e *Engine) schedule(ctx context.Context, run durable.Run, at time.Time) {
	w := Wakeup{AgentID: run.AgentID, DeployID: run.DeployID, RunID: run.ID, At: at.UTC()}
	if e.cfg.Schedule != nil {
		if err := e.cfg.Schedule(context.WithoutCancel(ctx), w); err != nil {
			e.log.ErrorContext(ctx, "schedule a durable run's wake-up", "run", run.ID, "at", at, "err", err)
		}
		return
	}
	key := run.ID + " " + at.UTC().Format(time.RFC3339Nano)
	if at.Equal(run.LeaseUntil) {
		key = run.ID + " lease" // one per run: a new execution's replaces the last one's
	}
	e.timers.after(key, at.Sub(e.now()), func() {
		if err := e.Wake(context.Background(), w.AgentID, w.RunID); err != nil && !errors.Is(err, ErrShutdown) {
			e.log.Error("wake a durable run", "run", w.RunID, "err", err)
		}
	})
}
