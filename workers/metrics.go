package workers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/builder"
)

// QueueStats is what waits in a queue.
type QueueStats struct {
	Pending int           // tasks due to run and not claimed
	Oldest  time.Duration // how long the oldest of them has been due; 0 with none
}

// StatsReporter is optionally implemented by a Queue that can say what waits in it.
type StatsReporter interface {
	Stats(ctx context.Context) (QueueStats, error)
}

// RegisterQueueMetrics registers svc_queue_pending_tasks and svc_queue_oldest_pending_seconds,
// read from q at each scrape (within 2 s), when q reports its stats; otherwise nothing.
func RegisterQueueMetrics(reg prometheus.Registerer, q Queue) error {
	sr, ok := q.(StatsReporter)
	if !ok {
		return nil
	}
	read := func() QueueStats {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := sr.Stats(ctx)
		if err != nil {
			return QueueStats{Pending: -1, Oldest: -1} // a scrape shows the queue could not be read
		}
		return st
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_queue_pending_tasks", Help: "Tasks due to run and not claimed (-1: the queue could not be read)."},
			func() float64 { return float64(read().Pending) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_queue_oldest_pending_seconds", Help: "How long the oldest pending task has been due (-1: the queue could not be read)."},
			func() float64 { return read().Oldest.Seconds() }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// BuildMetrics count builds by outcome and time their steps. A nil *BuildMetrics records
// nothing.
type BuildMetrics struct {
	builds *prometheus.CounterVec
	steps  *prometheus.HistogramVec
}

// NewBuildMetrics makes the build metrics and registers them with reg.
func NewBuildMetrics(reg prometheus.Registerer) (*BuildMetrics, error) {
	m := &BuildMetrics{
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_builds_total", Help: "Build attempts by outcome: succeeded, failed, retried (a passing failure the queue retries), gave_up.",
		}, []string{"outcome"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "svc_build_step_duration_seconds", Help: "Build step durations by step and status.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"step", "status"}),
	}
	for _, c := range []prometheus.Collector{m.builds, m.steps} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// done records a build attempt that ended with outcome after steps.
func (m *BuildMetrics) done(outcome string, steps []builder.Step) {
	if m == nil {
		return
	}
	m.builds.WithLabelValues(outcome).Inc()
	for _, s := range steps {
		if s.Status != builder.StepSkipped {
			m.steps.WithLabelValues(s.Name, s.Status).Observe(s.Duration.Seconds())
		}
	}
}

// AutomationMetrics count the fires of automations (CONTRACT §9): runs by outcome, missed fire
// times and the lag from fire time to run start. A nil *AutomationMetrics records nothing.
type AutomationMetrics struct {
	runs   *prometheus.CounterVec
	misses prometheus.Counter
	lagSec prometheus.Histogram
}

// NewAutomationMetrics makes svc_automation_runs_total{outcome}, svc_automation_missed_total and
// svc_automation_lag_seconds and registers them with reg.
func NewAutomationMetrics(reg prometheus.Registerer) (*AutomationMetrics, error) {
	m := &AutomationMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_automation_runs_total",
			Help: "Fires of automations by outcome: done, failed, skipped (paused, or overlap skip), disabled (the saver was revoked), interrupted (the process running it stopped).",
		}, []string{"outcome"}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_automation_missed_total",
			Help: "Fire times of automations not run: older than their catchup window after downtime, or superseded by a later one within it.",
		}),
		lagSec: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_automation_lag_seconds",
			Help:    "Time from an automation's fire time (for run-now, events and store changes: when the fire was recorded) to the start of its run.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600},
		}),
	}
	for _, c := range []prometheus.Collector{m.runs, m.misses, m.lagSec} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// run counts a fire that ended with outcome.
func (m *AutomationMetrics) run(outcome string) {
	if m != nil {
		m.runs.WithLabelValues(outcome).Inc()
	}
}

// missed counts n missed fire times.
func (m *AutomationMetrics) missed(n int) {
	if m != nil && n > 0 {
		m.misses.Add(float64(n))
	}
}

// lag observes the lag of a run that started d after its fire time.
func (m *AutomationMetrics) lag(d time.Duration) {
	if m != nil {
		m.lagSec.Observe(max(d, 0).Seconds())
	}
}
