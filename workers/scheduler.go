package workers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"svc/automations"
	"svc/faults"
	"svc/registry"
)

// Defaults of SchedulerConfig.
const (
	DefaultSchedulerInterval = time.Second
	DefaultSchedulerBatch    = 500
	DefaultStaleAfter        = 30 * time.Second
	// OnTimeGrace is how late a fire may be scanned and still be on time whatever its catchup:
	// a catchup shorter than that (0 included) applies to downtime, not to the lag of a tick.
	OnTimeGrace = time.Minute
)

// SchedulerConfig configures a Scheduler. Zero values mean the documented defaults.
type SchedulerConfig struct {
	// Automations is the store scanned and claimed from. Required.
	Automations *registry.Automations
	// Queue receives the fire tasks (TaskAutomationFire). Required.
	Queue Queue
	// Interval is the time between two ticks of Run (default 1s).
	Interval time.Duration
	// Batch is the page size of the scan (default 500, at most 500): a tick reads pages until one
	// comes back short, so every due automation is handled in one tick.
	Batch int
	// StaleAfter is how long a fire may stay queued before a tick enqueues its task again, in
	// case it was lost between the claim and the enqueue (default 30s). The ticks look for such
	// fires every StaleAfter/2, not at every tick: a queue that is behind holds many fires
	// queued, and each would be enqueued again only to be refused as a duplicate.
	StaleAfter time.Duration
	// Now is the clock (default time.Now); the store should read the same one (WithClock).
	Now func() time.Time
	// Metrics counts the missed fires (svc_automation_missed_total); nil records nothing.
	Metrics *AutomationMetrics
	// Logger receives the errors of Run's ticks (default slog.Default()).
	Logger *slog.Logger
}

// Scheduler fires the schedules of automations (CONTRACT §9): each tick it scans the automations
// due, claims the fire of each (registry.Automations.ClaimFire, decided by the fire's primary key)
// and enqueues its task. Any number of Schedulers, in any number of processes, may tick on one
// database: a fire is claimed, hence enqueued, by exactly one of them, and its handler runs it at
// most once. Its methods are safe for concurrent use.
type Scheduler struct {
	cfg SchedulerConfig
	log *slog.Logger

	mu        sync.Mutex
	staleScan time.Time // when the last stale scan ran
}

// NewScheduler returns a Scheduler with cfg, its zero values replaced by the defaults.
func NewScheduler(cfg SchedulerConfig) *Scheduler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSchedulerInterval
	}
	if cfg.Batch <= 0 || cfg.Batch > DefaultSchedulerBatch {
		cfg.Batch = DefaultSchedulerBatch
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Scheduler{cfg: cfg, log: log}
}

// TickReport says what one tick did.
type TickReport struct {
	Due      int       // automations scanned as due
	Fired    int       // fires this scheduler claimed and enqueued
	Lost     int       // fires another scheduler claimed first
	Missed   int       // fire times counted as missed (older than catchup, or superseded)
	Advanced int       // automations whose next fire time moved without a fire (missed only, or ended)
	Requeued int       // stale queued fires enqueued again (or found with their task still pending)
	Failed   int       // automations or stale fires left to the next tick by an error
	Now      time.Time // the time the tick scanned at
}

// Run ticks every Interval until ctx is done, then returns nil. A tick's error is logged and the
// next tick tries again.
func (s *Scheduler) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		rep, err := s.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("automation scheduler tick", "err", err, "due", rep.Due, "fired", rep.Fired, "failed", rep.Failed)
		}
		timer.Reset(s.untilNext(ctx, rep.Now))
	}
}

// minTickGap is the least time between two ticks that Run brings forward to a fire time, so
// that fires a few milliseconds apart are claimed a batch at a time.
const minTickGap = 50 * time.Millisecond

// untilNext is how long Run sleeps after the tick at now: until the next fire time after it,
// if that comes within Interval (at least minTickGap, or Interval if shorter), else Interval.
// Waking at the fire time instead of at the next tick is what keeps a fire's lag from being
// up to a whole Interval (on average half of it) before its claim; an idle scheduler still
// ticks once an Interval.
func (s *Scheduler) untilNext(ctx context.Context, now time.Time) time.Duration {
	next, ok, err := s.cfg.Automations.NextFireAfter(ctx, now)
	if err != nil || !ok {
		return s.cfg.Interval
	}
	d := next.Sub(s.cfg.Now())
	if d >= s.cfg.Interval {
		return s.cfg.Interval
	}
	return max(d, min(minTickGap, s.cfg.Interval))
}

// Tick does one scan at Now: it claims and enqueues the fire due of every due automation, moves
// on the next fire time of those with only missed fires (or none left), and enqueues again the
// fires queued for longer than StaleAfter. An error of one automation does not stop the others:
// the tick returns the first one with the count of failures, and the next tick tries again.
func (s *Scheduler) Tick(ctx context.Context) (TickReport, error) {
	now := s.cfg.Now()
	rep := TickReport{Now: now}
	var errs []error
	var after *registry.Automation
	var missed []int
	for {
		page, err := s.cfg.Automations.DueAfter(ctx, now, after, s.cfg.Batch)
		if err != nil {
			return rep, err
		}
		rep.Due += len(page)
		// The page's fires are claimed in one transaction and their tasks enqueued in one
		// batch: a transaction and an enqueue per automation were most of a tick's cost.
		var claims []registry.FireClaim
		for i := range page {
			c, err := s.plan(ctx, &page[i], now, &rep)
			if err != nil {
				rep.Failed++
				errs = append(errs, err)
			}
			if c != nil {
				claims = append(claims, c.FireClaim)
				missed = append(missed, c.missed)
			}
		}
		if err := s.claim(ctx, claims, missed, &rep); err != nil {
			errs = append(errs, err)
		}
		claims, missed = claims[:0], missed[:0]
		if len(page) < s.cfg.Batch {
			break
		}
		after = &page[len(page)-1]
	}
	if s.staleDue(now) {
		errs = append(errs, s.requeueStale(ctx, now, &rep)...)
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("%d errors, the first: %w", len(errs), errs[0])
	}
	return rep, nil
}

// staleDue reports whether the stale scan is due at now, and if so records it as done.
func (s *Scheduler) staleDue(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.staleScan.IsZero() && now.Sub(s.staleScan) < s.cfg.StaleAfter/2 && !now.Before(s.staleScan) {
		return false
	}
	s.staleScan = now
	return true
}

// requeueStale enqueues again the fires queued for longer than StaleAfter, counting them in rep,
// and returns its errors.
func (s *Scheduler) requeueStale(ctx context.Context, now time.Time, rep *TickReport) []error {
	stale, err := s.cfg.Automations.StaleQueuedFires(ctx, now.Add(-s.cfg.StaleAfter), s.cfg.Batch)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, f := range stale {
		// The task ID dedupes it against a task still pending; the handler's StartFire against
		// one that ran. The trigger and event of a lost task are not kept: the handler reads the
		// trigger kind from the spec.
		if err := EnqueueAutomationFire(ctx, s.cfg.Queue, AutomationFireTask{AutomationID: f.AutomationID, FireTime: f.FireTime}); err != nil {
			rep.Failed++
			errs = append(errs, err)
			continue
		}
		rep.Requeued++
	}
	return errs
}

// plannedClaim is the fire a due automation is to claim, with the fire times it missed.
type plannedClaim struct {
	registry.FireClaim
	missed int
}

// plan handles one due automation a at now: the fire to claim, or nil when it has none due (its
// next fire time is then moved on at once).
func (s *Scheduler) plan(ctx context.Context, a *registry.Automation, now time.Time, rep *TickReport) (*plannedClaim, error) {
	var next *time.Time
	var due []time.Time
	missed := 0
	spec, err := automations.Decode(a.Spec)
	if err == nil {
		spec.Created = a.CreatedAt
		if spec.CatchupWindow() < OnTimeGrace {
			spec.Catchup = OnTimeGrace.String()
		}
		var sched automations.Schedule
		if sched, err = spec.Schedule(); err == nil {
			// The stored next fire time is the first not yet handled.
			due, missed = automations.Due(spec, a.NextFireAt.Add(-time.Nanosecond), now)
			if t, ok := sched.Next(now); ok {
				next = &t
			}
		}
	}
	if err != nil {
		s.log.Warn("automation no longer schedules: its next fire time is cleared", "automation", a.ID, "err", err)
	}
	if len(due) == 0 {
		won, err := s.cfg.Automations.AdvanceNext(ctx, a.ID, a.NextFireAt, next)
		if err != nil {
			return nil, err
		}
		if won {
			rep.Advanced++
			s.missed(missed, rep)
		}
		return nil, nil
	}
	return &plannedClaim{FireClaim: registry.FireClaim{AutomationID: a.ID, FireTime: due[0], NextFire: next}, missed: missed}, nil
}

// claim claims the fires of claims (registry.Automations.ClaimFires) and enqueues the tasks of
// those it won, counting the failures in rep. A failed enqueue leaves them queued: a later tick enqueues them again as stale.
func (s *Scheduler) claim(ctx context.Context, claims []registry.FireClaim, missed []int, rep *TickReport) error {
	if len(claims) == 0 {
		return nil
	}
	won, err := s.cfg.Automations.ClaimFires(ctx, claims)
	if err != nil {
		rep.Failed += len(claims)
		return err
	}
	tasks := make([]AutomationFireTask, 0, len(claims))
	for i, c := range claims {
		if !won[i] {
			rep.Lost++ // claimed first by another scheduler, or deleted since the scan
			continue
		}
		s.missed(missed[i], rep)
		faults.Point("automation.claim") // the fire claimed, its task not enqueued: a later tick's stale scan enqueues it
		tasks = append(tasks, AutomationFireTask{AutomationID: c.AutomationID, FireTime: c.FireTime, Trigger: TriggerSchedule})
	}
	if err := EnqueueAutomationFires(ctx, s.cfg.Queue, tasks); err != nil {
		rep.Failed += len(tasks)
		return err
	}
	rep.Fired += len(tasks)
	return nil
}

// missed counts n missed fire times, by the scheduler that won the claim or the move only.
func (s *Scheduler) missed(n int, rep *TickReport) {
	rep.Missed += n
	s.cfg.Metrics.missed(n)
}
