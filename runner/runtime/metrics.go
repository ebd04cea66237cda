package runtime

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/agent"
	"svc/runner/durable"
	"svc/runner/models"
	"svc/runner/turn"
)

// Metrics are the Prometheus metrics of the runtimes of a process. Share one among them: each
// runtime reports its turns through a turnMetrics that bounds their label values.
//
// Every label value is one of a few: /metrics may be scraped without credentials (see
// SVC_METRICS_TOKEN), and each distinct value is a series kept for the life of the process. So
// a value a client or a model chooses never becomes a label as it is: the model of a chat is
// its name only when the agent configures it (svc.json models, the runtime's default model,
// echo), and a tool call's tool only when the agent has that tool; anything else is
// OtherLabel.
type Metrics struct {
	streams    prometheus.Gauge
	turns      *prometheus.CounterVec
	firstDelta prometheus.Histogram
	tokens     *prometheus.CounterVec
	toolCalls  *prometheus.CounterVec
	executions *prometheus.HistogramVec
}

// OtherLabel is the label value of a model, provider or tool the agent does not define.
const OtherLabel = "other"

// NewMetrics makes the runtime metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_chat_turns_active", Help: "Chat turns running now (streams, sync and AI SDK answers).",
		}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_chat_turns_total", Help: "Chat turns by done reason.",
		}, []string{"reason"}),
		firstDelta: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "svc_chat_first_delta_seconds", Help: "Time from the start of a turn to its first text or thinking delta.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_model_tokens_total", Help: "Model tokens by provider, model and kind (input, output, cached).",
		}, []string{"provider", "model", "kind"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_tool_calls_total", Help: "Tool calls by tool and status (success, error).",
		}, []string{"tool", "status"}),
		executions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "svc_durable_execution_seconds", Help: "Executions of durable tool runs (a start or resume to the next pause or the end) by tool and outcome (completed, failed, awaiting-input, sleeping, lost).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"tool", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.streams, m.turns, m.firstDelta, m.tokens, m.toolCalls, m.executions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// turnMetrics is the turn.Observer of one runtime: it counts its turns on m with the model
// and tool names its agent does not define reported as OtherLabel.
type turnMetrics struct {
	m      *Metrics
	models map[agent.ModelRef]bool // provider and model only
	tools  map[string]bool
}

var _ turn.Observer = (*turnMetrics)(nil)

// newTurnMetrics returns the observer of a runtime of ag whose default model is def and whose
// profiles offer the tools named in tools; nil (no interface holding a nil pointer) without
// metrics.
func newTurnMetrics(m *Metrics, ag *agent.Agent, def agent.ModelRef, tools []string) turn.Observer {
	if m == nil {
		return nil
	}
	o := &turnMetrics{m: m, models: map[agent.ModelRef]bool{{Provider: models.ProviderEcho, Model: "echo"}: true}, tools: map[string]bool{}}
	for _, ref := range ag.Config.Models {
		o.models[agent.ModelRef{Provider: ref.Provider, Model: ref.Model}] = true
	}
	if def.Provider != "" {
		o.models[agent.ModelRef{Provider: def.Provider, Model: def.Model}] = true
	}
	for _, t := range tools {
		o.tools[t] = true
	}
	return o
}

// TurnStarted implements turn.Observer.
func (o *turnMetrics) TurnStarted() { o.m.streams.Inc() }

// TurnDone implements turn.Observer.
func (o *turnMetrics) TurnDone(r turn.Report) {
	switch r.Provider {
	case models.ProviderOpenAI, models.ProviderAnthropic, models.ProviderOpenAICompatible, models.ProviderEcho:
	default:
		r.Provider = OtherLabel
	}
	if !o.models[agent.ModelRef{Provider: r.Provider, Model: r.Model}] {
		r.Model = OtherLabel
	}
	tools := make([]turn.ToolOutcome, len(r.Tools))
	for i, t := range r.Tools {
		if !o.tools[t.Name] {
			t.Name = OtherLabel
		}
		tools[i] = t
	}
	r.Tools = tools
	o.m.turnDone(r)
}

// turnDone counts a turn whose label values are bounded.
func (m *Metrics) turnDone(r turn.Report) {
	m.streams.Dec()
	m.turns.WithLabelValues(string(r.Reason)).Inc()
	if r.FirstDelta > 0 {
		m.firstDelta.Observe(r.FirstDelta.Seconds())
	}
	add := func(kind string, n int) {
		if n > 0 {
			m.tokens.WithLabelValues(r.Provider, r.Model, kind).Add(float64(n))
		}
	}
	add("input", r.Usage.InputTokens)
	add("output", r.Usage.OutputTokens)
	add("cached", r.Usage.CachedTokens)
	for _, t := range r.Tools {
		status := "success"
		if t.Error {
			status = "error"
		}
		m.toolCalls.WithLabelValues(t.Name, status).Inc()
	}
}

// DurableExecuted records one execution of a durable run (it implements engine.Observer). tool
// is a durable tool of the agent's bundle, a bounded set.
func (m *Metrics) DurableExecuted(tool, outcome string, d time.Duration) {
	if m != nil {
		m.executions.WithLabelValues(tool, outcome).Observe(d.Seconds())
	}
}

// ParkedRuns registers svc_durable_runs, the durable runs of every agent by status, read from
// count at each scrape (the database holds them, not a process).
func ParkedRuns(reg prometheus.Registerer, count func(ctx context.Context) (map[string]int64, error)) error {
	return reg.Register(&runsCollector{count: count, desc: prometheus.NewDesc("svc_durable_runs",
		"Durable tool runs by status (awaiting-input and sleeping runs are parked), in the platform database.", []string{"status"}, nil)})
}

type runsCollector struct {
	count func(ctx context.Context) (map[string]int64, error)
	desc  *prometheus.Desc
}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := c.count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, status := range []string{durable.Running, durable.AwaitingInput, durable.Sleeping, durable.Completed, durable.Failed, durable.Cancelled} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n[status]), status)
	}
}
