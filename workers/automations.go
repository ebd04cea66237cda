package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"svc/automations"
	"svc/faults"
	"svc/registry"
)

// TaskAutomationFire is the task type that runs one fire of an automation (CONTRACT §9).
const TaskAutomationFire = "automation:fire"

// The triggers of a fire, as AutomationFireTask.Trigger names them.
const (
	TriggerSchedule = "schedule" // a cron, every or at fire time
	TriggerRun      = "run"      // run now, by a user
	TriggerEvent    = "event"    // a signed event
	TriggerStore    = "store"    // a change of a store row
)

// Limits of the fire tasks.
const (
	// AutomationRunTimeout bounds one attempt of a fire, the agent's turn included.
	AutomationRunTimeout = time.Hour
	// automationMaxRetry lets an attempt that failed before its run started (a database blip)
	// try again for a few minutes; a retry of one that started only marks it interrupted.
	automationMaxRetry = 10
	// DefaultRecheck is how long a fire held by overlap queue waits before it looks again.
	DefaultRecheck = time.Second
)

// AutomationFireTask is the payload of TaskAutomationFire: one fire, recorded before the task is
// enqueued (registry.Automations.ClaimFire or RecordFire).
type AutomationFireTask struct {
	AutomationID string    `json:"automationId"`
	FireTime     time.Time `json:"fireTime"`
	// Trigger is one of TriggerSchedule, TriggerRun, TriggerEvent and TriggerStore; "" when the
	// scheduler enqueued a fire again after its task was lost (the handler then reads the kind
	// of the automation's trigger).
	Trigger string `json:"trigger,omitempty"`
	// Event is the body of an event or the changed row of a store trigger.
	Event json.RawMessage `json:"event,omitempty"`
}

// automationFireTaskID is the task ID of the fire of automationID at fireTime: the fire's key,
// to the microsecond as the registry keeps it, so that a fire has one task however often it is
// enqueued.
func automationFireTaskID(automationID string, fireTime time.Time) string {
	return "automation:" + automationID + ":" + strconv.FormatInt(fireTime.UnixMicro(), 10)
}

// waitSuffix marks the task of a fire that waits its turn under overlap queue: it alternates
// with the fire's own ID, since a task cannot enqueue its own ID while it runs.
const waitSuffix = ":wait"

// NewAutomationFireTask returns the task of fire f; its ID is the fire's key, so that a fire
// has one task pending however often it is enqueued. f.Event must be valid JSON or empty.
func NewAutomationFireTask(f AutomationFireTask) Task {
	p, _ := json.Marshal(f) // strings, a time and valid JSON always marshal
	return Task{Type: TaskAutomationFire, Payload: p, ID: automationFireTaskID(f.AutomationID, f.FireTime)}
}

// EnqueueAutomationFire enqueues the task of fire f on q. A fire whose task is pending or running
// already is not enqueued again (nil).
func EnqueueAutomationFire(ctx context.Context, q Queue, f AutomationFireTask) error {
	if len(f.Event) > 0 && !json.Valid(f.Event) {
		return fmt.Errorf("%w: the event of a fire of automation %s is not valid JSON", ErrBadTask, f.AutomationID)
	}
	return enqueueAutomationFire(ctx, q, NewAutomationFireTask(f), f)
}

// EnqueueAutomationFires enqueues the tasks of fires fs on q, in one call when q can
// (BatchEnqueuer); a fire whose task is pending or running already is left out.
func EnqueueAutomationFires(ctx context.Context, q Queue, fs []AutomationFireTask) error {
	ts := make([]Task, 0, len(fs))
	for _, f := range fs {
		if len(f.Event) > 0 && !json.Valid(f.Event) {
			return fmt.Errorf("%w: the event of a fire of automation %s is not valid JSON", ErrBadTask, f.AutomationID)
		}
		ts = append(ts, NewAutomationFireTask(f))
	}
	if err := EnqueueAll(ctx, q, ts, MaxRetry(automationMaxRetry), Timeout(AutomationRunTimeout)); err != nil {
		return fmt.Errorf("enqueue %d automation fires: %w", len(fs), err)
	}
	return nil
}

func enqueueAutomationFire(ctx context.Context, q Queue, t Task, f AutomationFireTask, opts ...Option) error {
	opts = append(opts, MaxRetry(automationMaxRetry), Timeout(AutomationRunTimeout))
	err := q.Enqueue(ctx, t, opts...)
	switch {
	case errors.Is(err, ErrDuplicate):
		return nil
	case err != nil:
		return fmt.Errorf("enqueue fire of automation %s at %s: %w", f.AutomationID, f.FireTime.UTC().Format(time.RFC3339Nano), err)
	}
	return nil
}

// AutomationRun is one fire for AutomationFireConfig.Run to run.
type AutomationRun struct {
	Automation registry.Automation
	// Spec is Automation.Spec decoded, its Created set.
	Spec    *automations.Automation
	Fire    registry.AutomationFire
	Trigger string
	Event   json.RawMessage
	// Started records the session of the run as soon as it exists; Run calls it once.
	Started func(sessionID string)
}

// AutomationResult is how a run ended: its session, the done reason of its turn, and the
// turn's last error message when it ended in error.
type AutomationResult struct {
	SessionID  string
	DoneReason string
	Error      string
}

// SaverRevokedError is returned by AutomationFireConfig.Run when the saver's credential no
// longer holds: the automation is disabled with Reason, shown to its owner.
type SaverRevokedError struct {
	Reason string
}

// Error implements error.
func (e *SaverRevokedError) Error() string {
	return "the automation's saver no longer holds: " + e.Reason
}

// AutomationFireConfig is what AutomationFireHandler needs.
type AutomationFireConfig struct {
	// Automations is the store of the fires. Required.
	Automations *registry.Automations
	// Queue takes the fires that wait their turn under overlap queue. Required.
	Queue Queue
	// Run runs the fire: a turn of the automation's agent on its environment's active
	// deployment. Its error fails the fire (a *SaverRevokedError also disables the
	// automation); a run is never tried twice. Required.
	Run func(ctx context.Context, r AutomationRun) (AutomationResult, error)
	// Metrics counts runs by outcome and their lag; nil records nothing.
	Metrics *AutomationMetrics
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives what the handler logs (default slog.Default()).
	Logger *slog.Logger
	// Recheck is how long a fire held by overlap queue waits before it looks again (default 1s).
	Recheck time.Duration
}

// AutomationFireHandler is the handler of TaskAutomationFire. A fire runs at most once, however
// often its task is delivered: it starts only from queued (registry.Automations.StartFire), and a
// retry (Attempt > 1) that finds it running is the retry of an attempt that died mid-run, so it
// marks it failed ("interrupted") instead of running it again. Its outcomes (the runs_total label): done,
// failed, skipped (paused, or overlap skip), disabled (the saver was revoked), interrupted.
type AutomationFireHandler struct {
	cfg AutomationFireConfig
	log *slog.Logger
}

var _ FailureHandler = (*AutomationFireHandler)(nil)

// NewAutomationFireHandler returns the handler with cfg, its zero values replaced by the
// defaults.
func NewAutomationFireHandler(cfg AutomationFireConfig) *AutomationFireHandler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultRecheck
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &AutomationFireHandler{cfg: cfg, log: log}
}

// The outcomes of a fire, the label of svc_automation_runs_total.
const (
	outcomeDone        = "done"
	outcomeFailed      = "failed"
	outcomeSkipped     = "skipped"
	outcomeDisabled    = "disabled"
	outcomeInterrupted = "interrupted"
)

// errInterrupted is the error of a fire whose attempt stopped mid-run.
const errInterrupted = "interrupted: the process running it stopped"

// ProcessTask implements Handler.
func (h *AutomationFireHandler) ProcessTask(ctx context.Context, t Task) error {
	var p AutomationFireTask
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.AutomationID == "" || p.FireTime.IsZero() {
		return fmt.Errorf("%w: automation fire payload %q is unreadable", ErrSkipRetry, t.Payload)
	}
	if h.cfg.Run == nil {
		return fmt.Errorf("%w: AutomationFireConfig.Run is not set", ErrSkipRetry)
	}
	store := h.cfg.Automations
	fire, err := store.GetFire(ctx, p.AutomationID, p.FireTime)
	switch {
	case errors.Is(err, registry.ErrFireNotFound):
		return nil // deleted with its automation
	case err != nil:
		return err
	case fire.Status == registry.FireRunning && Attempt(ctx) > 1:
		// A retry of this task: its attempt that started the fire stopped mid-run.
		return h.end(ctx, fire, outcomeInterrupted, registry.FireUpdate{Status: registry.FireFailed, Error: errInterrupted})
	case fire.Status != registry.FireQueued:
		// Ended already, or started by another task of the fire (one enqueued again as stale
		// while its :wait task was pending): that one's own retry marks it if it stops.
		return nil
	}
	// The fire's record says what fired it and carries its event, also when its task was lost
	// and enqueued again without them.
	if fire.Trigger != "" {
		p.Trigger = fire.Trigger
	}
	if len(fire.Event) > 0 {
		p.Event = fire.Event
	}
	a, err := store.ByID(ctx, p.AutomationID)
	switch {
	case errors.Is(err, registry.ErrAutomationNotFound):
		return nil
	case err != nil:
		return err
	case !a.Enabled && p.Trigger != TriggerRun: // the operator's button runs a paused automation
		reason := "paused"
		if a.DisabledReason != "" {
			reason = "disabled: " + a.DisabledReason
		}
		return h.end(ctx, fire, outcomeSkipped, registry.FireUpdate{Status: registry.FireSkipped, Error: reason})
	}
	spec, err := automations.Decode(a.Spec)
	if err != nil {
		return h.end(ctx, fire, outcomeFailed, registry.FireUpdate{Status: registry.FireFailed, Error: "the automation does not decode: " + err.Error()})
	}
	spec.Created = a.CreatedAt
	if p.Trigger == "" {
		p.Trigger = triggerOf(spec)
	}

	// Overlap: skip and queue start the fire only while no other fire of the automation runs.
	started := h.cfg.Now()
	err = store.StartFire(ctx, fire.AutomationID, fire.FireTime, started, spec.Overlap != automations.OverlapAllow)
	switch {
	case errors.Is(err, registry.ErrFireBusy):
		if automations.Decide(spec.Overlap, true) == automations.Queue {
			return h.wait(ctx, t, p)
		}
		return h.end(ctx, fire, outcomeSkipped, registry.FireUpdate{Status: registry.FireSkipped, Error: "overlap: the previous run was still running"})
	case errors.Is(err, registry.ErrFireNotQueued), errors.Is(err, registry.ErrFireNotFound):
		return nil // another delivery of the fire took it
	case err != nil:
		return err
	}
	fire.Status, fire.StartedAt = registry.FireRunning, &started
	h.cfg.Metrics.lag(started.Sub(fire.FireTime))
	return h.run(ctx, a, spec, fire, p)
}

// run runs the started fire and records how it ended. It returns nil whatever the run did: a
// run is never tried twice.
func (h *AutomationFireHandler) run(ctx context.Context, a registry.Automation, spec *automations.Automation, fire registry.AutomationFire, p AutomationFireTask) error {
	log := h.log.With("automation", a.ID, "fire", fire.FireTime)
	started := func(sessionID string) {
		if err := h.cfg.Automations.UpdateFire(ctx, fire.AutomationID, fire.FireTime, registry.FireUpdate{SessionID: sessionID}); err != nil {
			log.Error("record the session of an automation's run", "session", sessionID, "err", err)
		}
		faults.Point("automation.run") // the run's session started, its turn not yet run
	}
	res, err := h.cfg.Run(ctx, AutomationRun{Automation: a, Spec: spec, Fire: fire, Trigger: p.Trigger, Event: p.Event, Started: started})
	var revoked *SaverRevokedError
	switch {
	case errors.As(err, &revoked):
		log.Warn("automation disabled: its saver no longer holds", "reason", revoked.Reason)
		dctx, cancel := boundedCtx(ctx)
		defer cancel()
		if err := h.cfg.Automations.Disable(dctx, a.ID, revoked.Reason); err != nil && !errors.Is(err, registry.ErrAutomationNotFound) {
			return fmt.Errorf("disable automation %s: %w", a.ID, err)
		}
		return h.end(ctx, fire, outcomeDisabled, registry.FireUpdate{Status: registry.FireFailed, SessionID: res.SessionID, Error: revoked.Reason})
	case err != nil:
		return h.end(ctx, fire, outcomeFailed, registry.FireUpdate{Status: registry.FireFailed, SessionID: res.SessionID, Error: err.Error()})
	}
	return h.end(ctx, fire, outcomeDone, registry.FireUpdate{Status: registry.FireDone, SessionID: res.SessionID, DoneReason: res.DoneReason, Error: res.Error})
}

// wait enqueues the fire again after Recheck under the other of its two task IDs; it stays
// queued meanwhile.
func (h *AutomationFireHandler) wait(ctx context.Context, t Task, p AutomationFireTask) error {
	next := NewAutomationFireTask(p)
	if !strings.HasSuffix(t.ID, waitSuffix) {
		next.ID += waitSuffix
	}
	return enqueueAutomationFire(ctx, h.cfg.Queue, next, p, Delay(h.cfg.Recheck))
}

// end records how fire ended (u, with its end time) and counts outcome. The record outlives a
// cancelled ctx (the attempt's timeout), bounded on its own.
func (h *AutomationFireHandler) end(ctx context.Context, fire registry.AutomationFire, outcome string, u registry.FireUpdate) error {
	ctx, cancel := boundedCtx(ctx)
	defer cancel()
	ended := h.cfg.Now()
	u.EndedAt = &ended
	if err := h.cfg.Automations.UpdateFire(ctx, fire.AutomationID, fire.FireTime, u); err != nil {
		if errors.Is(err, registry.ErrFireNotFound) {
			return nil // deleted with its automation meanwhile
		}
		return fmt.Errorf("record the end of fire %s of automation %s: %w", fire.FireTime.Format(time.RFC3339Nano), fire.AutomationID, err)
	}
	h.cfg.Metrics.run(outcome)
	return nil
}

// TaskFailed implements FailureHandler: the task of a fire gave up, so the fire is failed
// (interrupted when it had started).
func (h *AutomationFireHandler) TaskFailed(ctx context.Context, t Task, cause error) {
	var p AutomationFireTask
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.AutomationID == "" {
		return
	}
	fire, err := h.cfg.Automations.GetFire(ctx, p.AutomationID, p.FireTime)
	if err != nil {
		return
	}
	switch fire.Status {
	case registry.FireQueued:
		err = h.end(ctx, fire, outcomeFailed, registry.FireUpdate{Status: registry.FireFailed, Error: "gave up: " + cause.Error()})
	case registry.FireRunning:
		err = h.end(ctx, fire, outcomeInterrupted, registry.FireUpdate{Status: registry.FireFailed, Error: errInterrupted})
	}
	if err != nil {
		h.log.Error("mark failed the fire of an automation whose task gave up", "automation", p.AutomationID, "fire", p.FireTime, "err", err)
	}
}

// boundedCtx is ctx kept from cancellation, bounded to 30s: for what must be recorded after the
// attempt's ctx ended.
func boundedCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// triggerOf is the trigger kind of a's fires when the task does not say.
func triggerOf(a *automations.Automation) string {
	switch {
	case a.Trigger.Event:
		return TriggerEvent
	case a.Trigger.Store != "":
		return TriggerStore
	}
	return TriggerSchedule
}
