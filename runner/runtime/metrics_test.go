package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
)

// The runtime counts turns by done reason, tokens by model, tool calls by status and the time
// to the first delta.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := runtime.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Metrics: m})
	e.chat("", map[string]any{"message": `/tool store__tickets__get {"key": "acme-1"}`})
	e.chat("", map[string]any{"message": `/tool store__tickets__get {"nokey": 1}`})
	e.do("POST", "/chat/sync", "", map[string]any{"message": "hello"})
	want := `
# HELP svc_chat_turns_active Chat turns running now (streams, sync and AI SDK answers).
# TYPE svc_chat_turns_active gauge
svc_chat_turns_active 0
# HELP svc_chat_turns_total Chat turns by done reason.
# TYPE svc_chat_turns_total counter
svc_chat_turns_total{reason="model_stop"} 3
# HELP svc_tool_calls_total Tool calls by tool and status (success, error).
# TYPE svc_tool_calls_total counter
svc_tool_calls_total{status="error",tool="store__tickets__get"} 1
svc_tool_calls_total{status="success",tool="store__tickets__get"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "svc_chat_turns_active", "svc_chat_turns_total", "svc_tool_calls_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "svc_model_tokens_total"); n != 2 { // echo/echo input and output
		t.Errorf("token series = %d, want 2", n)
	}
	// Each turn streamed a delta: the histogram holds three observations.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "svc_chat_first_delta_seconds" {
			if c := f.GetMetric()[0].GetHistogram().GetSampleCount(); c != 3 {
				t.Errorf("first delta observations = %d, want 3", c)
			}
		}
	}
}

// Durable executions are counted by tool and outcome, and svc_durable_runs reads the parked
// runs from the store at each scrape.
func TestDurableMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := runtime.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	db := dbtest.SQLite(t)
	runs := durable.NewDB(db)
	if err := runtime.ParkedRuns(reg, runs.CountByStatus); err != nil {
		t.Fatal(err)
	}
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Metrics: m, Durable: durableEngine(t, engine.Config{Store: runs, Metrics: m})})
	e.chat("", map[string]any{"message": `/tool refund_request {"customer_id":"c1","amount_eur":900,"reason":"x"}`})
	e.chat("", map[string]any{"message": `/tool refund_request {"customer_id":"c2","amount_eur":10,"reason":"x"}`})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	parked := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "svc_durable_execution_seconds":
				got[labels["tool"]+" "+labels["outcome"]] = mt.GetHistogram().GetSampleCount()
			case "svc_durable_runs":
				parked[labels["status"]] = mt.GetGauge().GetValue()
			}
		}
	}
	if want := map[string]uint64{"refund_request awaiting-input": 1, "refund_request completed": 1}; !cmp.Equal(got, want) {
		t.Errorf("executions %v, want %v", got, want)
	}
	if parked["awaiting-input"] != 1 || parked["completed"] != 1 || parked["sleeping"] != 0 {
		t.Errorf("svc_durable_runs %v", parked)
	}
}

// The model a client sends and the tool a model calls are chosen outside the agent: as label
// values they would add series to /metrics without bound (30 chats with made-up model names
// added 60 series; a 100 KB name made /metrics 221 KB). A model or tool the agent does not
// define is counted as "other"; its configured models, the default model and echo keep their
// names.
func TestMetricsLabelsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := runtime.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"ok"}, Usage: modelstest.Usage{InputTokens: 3, OutputTokens: 1}})
	ag := loadAgent(t, "support-desk")
	ag.Config.Models["fast"] = agent.ModelRef{Provider: "openai", Model: "gpt-4o-mini"}
	e := start(t, runtime.Options{Agent: ag, Metrics: m, Models: openaiModels(srv),
		DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4.1"}})
	for i := range 30 {
		e.chat("", map[string]any{"message": "hi", "model": map[string]any{"provider": "openai", "model": fmt.Sprintf("made-up-%d", i)}})
	}
	e.chat("", map[string]any{"message": "hi", "model": map[string]any{"provider": "openai", "model": strings.Repeat("x", runtime.MaxModelNameLen)}})
	e.chat("", map[string]any{"message": "hi", "model": map[string]any{"provider": "openai", "model": "gpt-4o-mini"}})
	e.chat("", map[string]any{"message": `/tool store__tickets__get {"key": "acme-1"}`}) // echo, models.main
	e.chat("", map[string]any{"message": `/tool ` + strings.Repeat("n", 1000) + ` {}`})  // no such tool
	e.chat("", map[string]any{"message": `/tool made_up_tool {}`})                       // no such tool
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "hi", "model": map[string]any{"provider": "openai", "model": strings.Repeat("y", 100_000)}}); r.Status != 400 || r.JSON["field"] != "model.model" {
		t.Errorf("a 100 KB model name: %d %s, want 400 naming model.model", r.Status, r.Body)
	}
	// The series, by their labels: the made-up and the over-long names are all "other".
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	values := map[string]float64{}
	for _, f := range families {
		if name := f.GetName(); name == "svc_model_tokens_total" || name == "svc_tool_calls_total" {
			for _, mt := range f.GetMetric() {
				s := name
				for _, l := range mt.GetLabel() {
					s += " " + l.GetName() + "=" + l.GetValue()
				}
				series = append(series, s)
				values[s] = mt.GetCounter().GetValue()
			}
		}
	}
	want := []string{
		"svc_model_tokens_total kind=input model=echo provider=echo",
		"svc_model_tokens_total kind=input model=gpt-4o-mini provider=openai",
		"svc_model_tokens_total kind=input model=other provider=openai",
		"svc_model_tokens_total kind=output model=echo provider=echo",
		"svc_model_tokens_total kind=output model=gpt-4o-mini provider=openai",
		"svc_model_tokens_total kind=output model=other provider=openai",
		"svc_tool_calls_total status=error tool=other",
		"svc_tool_calls_total status=success tool=store__tickets__get",
	}
	if d := cmp.Diff(want, series); d != "" {
		t.Errorf("series (-want +got):\n%s", d)
	}
	if got := values["svc_model_tokens_total kind=input model=other provider=openai"]; got != 31*3 {
		t.Errorf("input tokens of the other models = %v, want the 31 turns' 93", got)
	}
}
