package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestDevExportsTraces runs `svc dev` with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP
// receiver started in the test: a chat's turn arrives as spans over protobuf, its trace id the
// done frame's trace_id, with the metadata under svc.meta.*.
func TestDevExportsTraces(t *testing.T) {
	var mu sync.Mutex
	spans := map[string]string{} // span name → trace id (hex)
	attrs := map[string]string{} // attributes of the turn span
	recv := otlpReceiver(t, &mu, spans, attrs)
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("AUTH_TOKEN", "")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if out, err := execute(ctx, "dev", "../../examples/greeter", "--port", port); err != nil {
			t.Errorf("svc dev: %v\n%s", err, out)
		}
	})
	url := "http://127.0.0.1:" + port
	waitHealthy(t, url+"/health")
	body, _ := json.Marshal(map[string]any{"message": "hi", "metadata": map[string]string{"userId": "u1"}})
	resp, err := http.Post(url+"/chat/sync", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Done struct {
			TraceID string `json:"trace_id"`
		} `json:"done"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	cancel() // svc dev stops and flushes its spans
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if answer.Done.TraceID == "" || spans["chat turn"] != answer.Done.TraceID || spans["chat echo"] != answer.Done.TraceID {
		t.Fatalf("done trace_id %q; spans received %v", answer.Done.TraceID, spans)
	}
	if attrs["svc.meta.userId"] != "u1" || attrs["svc.auth.method"] != "none" {
		t.Errorf("turn span attributes %v", attrs)
	}
}

// otlpReceiver is an OTLP/HTTP trace receiver: it records each span's trace id by name, and the
// string attributes of "chat turn" spans into attrs.
func otlpReceiver(t *testing.T, mu *sync.Mutex, spans, attrs map[string]string) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name] = hex.EncodeToString(s.TraceId)
					if s.Name == "chat turn" {
						for _, kv := range s.Attributes {
							attrs[kv.Key] = kv.Value.GetStringValue()
						}
					}
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
}

// TestPlatformTracesABuild: a redeploy sent with a W3C traceparent is one trace from the API
// request through the queue to the build and its steps.
func TestPlatformTracesABuild(t *testing.T) {
	var mu sync.Mutex
	spans, attrs := map[string]string{}, map[string]string{}
	recv := otlpReceiver(t, &mu, spans, attrs)
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20") // ms: export batches at once
	p := startPlatform(t)
	a := newAgent(t, p, "traced", true)
	if _, err := admin(p).UploadDir(context.Background(), a.AgentID, chatAgentDir(t)); err != nil {
		t.Fatal(err)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	var rd struct{ DeployID string }
	if status := p.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": a.AgentID, "environment": "production"},
		map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}, &rd); status != 200 && status != 202 {
		t.Fatalf("redeploy: %d", status)
	}
	p.waitServing(t, rd.DeployID)
	want := []string{"POST /api/deployments/redeploy", "build", "build validate", "build pack"}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		done := true
		for _, name := range want {
			if spans[name] != traceID {
				done = false
			}
		}
		got := fmt.Sprint(spans)
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans of trace %s: want %v; received %s", traceID, want, got)
		}
	}
	// The platform's /metrics counts the spans it exported.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := scrapeCounters(t, p.url+"/metrics")
		if m["svc_trace_spans_exported_total"] >= float64(len(want)) {
			if _, ok := m["svc_trace_spans_dropped_total"]; !ok {
				t.Error("/metrics has no svc_trace_spans_dropped_total")
			}
			if _, ok := m["svc_trace_export_failures_total"]; !ok {
				t.Error("/metrics has no svc_trace_export_failures_total")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc_trace_spans_exported_total = %v; want at least %d", m["svc_trace_spans_exported_total"], len(want))
		}
	}
}

// scrapeCounters reads the counters of a Prometheus /metrics page, summed over their labels.
func scrapeCounters(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s does not parse: %v", url, err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil {
				out[name] += c.GetValue()
			}
		}
	}
	return out
}

// Log lines written with a traced context carry its trace_id.
func TestLogsCarryTraceID(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(Config{LogLevel: "info", LogFormat: "json"}, &buf)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	log.InfoContext(ctx, "traced")
	log.With("k", "v").InfoContext(context.Background(), "untraced")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) || strings.Contains(lines[1], "trace_id") {
		t.Errorf("log lines:\n%s", buf.String())
	}
}
