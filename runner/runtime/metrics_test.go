package runtime_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"svc/migrations/dbtest"
	"svc/runner/durable"
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
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Metrics: m, Durable: runs})
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
