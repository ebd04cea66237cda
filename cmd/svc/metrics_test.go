package main

import (
	"net/http"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetrics: svc up's /metrics parses as Prometheus text, and its counters move with the work
// done: a build, a chat turn, API requests; the queue's gauges are there.
func TestMetrics(t *testing.T) {
	p := startPlatform(t)
	scrape := func() map[string]float64 {
		t.Helper()
		resp, err := http.Get(p.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("/metrics does not parse: %v", err)
		}
		out := map[string]float64{}
		for name, f := range families {
			for _, m := range f.GetMetric() {
				key := name
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" || l.GetName() == "reason" || l.GetName() == "step" {
						key += "|" + l.GetValue()
					}
				}
				switch {
				case m.GetCounter() != nil:
					out[key] += m.GetCounter().GetValue()
				case m.GetGauge() != nil:
					out[key] = m.GetGauge().GetValue()
				case m.GetHistogram() != nil:
					out[key] += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return out
	}
	before := scrape()
	a := newAgent(t, p, "metered", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	token := runtimeToken(t, p, a.AgentID)
	if status, out := agentPost(t, p, "metered", "/chat/sync", token, map[string]any{"message": "hi"}); status != 200 {
		t.Fatalf("chat: %d %v", status, out)
	}
	after := scrape()
	for key, min := range map[string]float64{
		"svc_builds_total|succeeded":               1,
		"svc_build_step_duration_seconds|validate": 1,
		"svc_chat_turns_total|model_stop":          1,
		"svc_http_requests_total":                  3,
		"svc_model_tokens_total":                   1,
	} {
		if after[key]-before[key] < min {
			t.Errorf("%s moved by %v, want at least %v", key, after[key]-before[key], min)
		}
	}
	for _, key := range []string{"svc_handler_sandbox_workers", "svc_handler_sandbox_kills_total|memory", "svc_handler_sandbox_kills_total|deadline"} {
		if _, ok := after[key]; !ok {
			t.Errorf("/metrics has no %s", key)
		}
	}
	for _, gauge := range []string{"svc_queue_pending_tasks", "svc_queue_oldest_pending_seconds", "svc_chat_turns_active"} {
		if v, ok := after[gauge]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0 once the work is done", gauge, v, ok)
		}
	}
}
