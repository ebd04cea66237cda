package traces_test

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"svc/traces"
)

// receiver is an OTLP/HTTP receiver that keeps each decoded request.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []*coltrace.ExportTraceServiceRequest
	headers []http.Header
}

func newReceiver(t *testing.T, h func(w http.ResponseWriter, r *http.Request) bool) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h != nil && !h(w, r) {
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Error(err)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			t.Error(err)
			return
		}
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			t.Errorf("the export does not decode: %v", err)
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, &req)
		rc.headers = append(rc.headers, r.Header.Clone())
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []*coltrace.ExportTraceServiceRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.reqs
}

// spans records spans that use every part of the protocol: each attribute type (zero values
// too), events, links, status codes, trace state, remote and local parents, every kind, two
// instrumentation scopes (one with a version, attributes and a schema URL) and a resource with a
// schema URL.
func spans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "svc"), attribute.Int("service.shard", 3))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	defer tp.Shutdown(context.Background())
	plain := tp.Tracer("svc")
	rich := tp.Tracer("svc/rich", trace.WithInstrumentationVersion("1.2.3"),
		trace.WithSchemaURL("https://opentelemetry.io/schemas/1.20.0"),
		trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x")))

	ts, err := trace.ParseTraceState("vendor=abc,other=d")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled,
		TraceState: ts, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	ctx, root := plain.Start(ctx, "chat turn", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("s", "text"), attribute.String("empty", ""), attribute.Bool("t", true),
		attribute.Bool("f", false), attribute.Int("zero", 0), attribute.Int64("neg", -42),
		attribute.Int64("big", 1<<62), attribute.Float64("pi", 3.14159), attribute.Float64("fzero", 0),
		attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, -2, 0}),
		attribute.Float64Slice("fs", []float64{0.5, -1}), attribute.StringSlice("ss", []string{"a", "", "c"}),
		attribute.ByteSlice("raw", []byte{0, 1, 255}), attribute.ByteSlice("noraw", nil),
		attribute.Slice("mixed", attribute.StringValue("x"), attribute.IntValue(7)),
		attribute.Map("m", attribute.String("k", "v"), attribute.Bool("b", true)),
		attribute.String("long", strings.Repeat("é", 300)),
	))
	_, model := rich.Start(ctx, "chat gpt-4o-mini", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("why", "cause")}}))
	model.AddEvent("first token", trace.WithAttributes(attribute.Int("n", 1)), trace.WithTimestamp(time.Unix(1700000000, 5)))
	model.AddEvent("")
	model.SetStatus(codes.Error, "model said no")
	model.End()
	for _, kind := range []trace.SpanKind{trace.SpanKindInternal, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindUnspecified} {
		_, s := plain.Start(ctx, "", trace.WithSpanKind(kind))
		s.SetStatus(codes.Ok, "")
		s.End()
	}
	root.SetAttributes(attribute.String("svc.done.reason", "stop"), attribute.String("s", "overridden"))
	root.End()
	_, lone := rich.Start(context.Background(), "lone", trace.WithTimestamp(time.Unix(0, 0)))
	lone.End(trace.WithTimestamp(time.Unix(0, 1)))
	return rec.Ended()
}

// TestMatchesOpenTelemetryExporter sends the same spans through the OpenTelemetry project's
// OTLP/HTTP exporter and through ours, and compares what the two receivers decode.
func TestMatchesOpenTelemetryExporter(t *testing.T) {
	ss := spans(t)
	theirs, ours := newReceiver(t, nil), newReceiver(t, nil)

	ref, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(theirs.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.ExportSpans(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
	_ = ref.Shutdown(t.Context())
	exp := newExporter(t, traces.Config{URL: ours.URL + "/v1/traces"})
	for range 2 { // the second export reuses the buffer and the encoded resource
		if err := exp.ExportSpans(t.Context(), ss); err != nil {
			t.Fatal(err)
		}
	}

	want, got := theirs.requests(), ours.requests()
	if len(want) != 1 || len(got) != 2 {
		t.Fatalf("requests: theirs %d, ours %d", len(want), len(got))
	}
	if n := len(want[0].ResourceSpans[0].ScopeSpans); n != 2 {
		t.Fatalf("the spans should fall in 2 scopes, got %d", n)
	}
	for _, g := range got {
		if diff := cmp.Diff(want[0], g, protocmp.Transform()); diff != "" {
			t.Errorf("ours differs from the OpenTelemetry exporter (-theirs +ours):\n%s", diff)
		}
	}
	if h := ours.headers[0]; h.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("Content-Type %q", h.Get("Content-Type"))
	}
}

func newExporter(t *testing.T, cfg traces.Config) *traces.Exporter {
	t.Helper()
	exp, err := traces.NewExporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	return exp
}

func TestGzipAndHeaders(t *testing.T) {
	rc := newReceiver(t, nil)
	exp := newExporter(t, traces.Config{URL: rc.URL + "/v1/traces", Gzip: true, Headers: map[string]string{"Authorization": "Bearer k"}})
	ss := spans(t)
	for range 2 {
		if err := exp.ExportSpans(t.Context(), ss); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(rc.requests()); n != 2 {
		t.Fatalf("%d requests", n)
	}
	h := rc.headers[1]
	if h.Get("Content-Encoding") != "gzip" || h.Get("Authorization") != "Bearer k" {
		t.Errorf("headers %v", h)
	}
	if n := len(rc.requests()[1].ResourceSpans[0].ScopeSpans[0].Spans); n == 0 {
		t.Error("no spans in the second gzip export")
	}
}

func TestRetries(t *testing.T) {
	var calls atomic.Int32
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) bool {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return false
		}
		return true
	})
	exp := newExporter(t, traces.Config{URL: rc.URL + "/v1/traces"})
	if err := exp.ExportSpans(t.Context(), spans(t)); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || len(rc.requests()) != 1 {
		t.Errorf("calls %d, received %d: want a retry after the 503", calls.Load(), len(rc.requests()))
	}
}

func TestFinalFailures(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("X-Case") == "partial" {
			// partial_success {rejected_spans: 2, error_message: "too old"}
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write([]byte{0x0a, 0x0b, 0x08, 0x02, 0x12, 0x07, 't', 'o', 'o', ' ', 'o', 'l', 'd'})
			return false
		}
		http.Error(w, "bad spans", http.StatusBadRequest)
		return false
	})
	exp := newExporter(t, traces.Config{URL: rc.URL + "/v1/traces"})
	err := exp.ExportSpans(t.Context(), spans(t))
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "bad spans") {
		t.Errorf("400: err = %v", err)
	}
	exp = newExporter(t, traces.Config{URL: rc.URL + "/v1/traces", Headers: map[string]string{"X-Case": "partial"}})
	err = exp.ExportSpans(t.Context(), spans(t))
	if err == nil || !strings.Contains(err.Error(), "rejected 2 of") || !strings.Contains(err.Error(), "too old") {
		t.Errorf("partial success: err = %v", err)
	}
	if err := exp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(t.Context(), spans(t)); err == nil {
		t.Error("an export after Shutdown should fail")
	}
}

// TestShutdownEndsRetry: a receiver that keeps answering 503 holds an export in its backoff
// until Shutdown.
func TestShutdownEndsRetry(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
		return false
	})
	exp := newExporter(t, traces.Config{URL: rc.URL + "/v1/traces", Timeout: time.Minute})
	done := make(chan error)
	go func() { done <- exp.ExportSpans(context.Background(), spans(t)) }()
	time.Sleep(50 * time.Millisecond)
	_ = exp.Shutdown(t.Context())
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "shut down") {
			t.Errorf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the export did not end at Shutdown")
	}
}

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name string
		env  func(string) (string, bool)
		want traces.Config
		err  string
	}{
		{name: "base endpoint", env: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"),
			want: traces.Config{URL: "http://c:4318/v1/traces"}},
		{name: "traces endpoint as is, TRACES_ settings first", env: env(
			"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://t:443/custom",
			"OTEL_EXPORTER_OTLP_HEADERS", "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=k%3D1, x = y ",
			"OTEL_EXPORTER_OTLP_TIMEOUT", "2500", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip"),
			want: traces.Config{URL: "https://t:443/custom", Headers: map[string]string{"api-key": "k=1", "x": "y"},
				Timeout: 2500 * time.Millisecond, Gzip: true}},
		{name: "grpc", env: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
			err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "endpoint not a URL", env: env("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"), err: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "header", env: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
			err: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "timeout", env: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s"),
			err: "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"},
		{name: "compression", env: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"),
			err: "OTEL_EXPORTER_OTLP_COMPRESSION"},
		{name: "certificate", env: env("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE", bad),
			err: "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{name: "client certificate alone", env: env("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", bad),
			err: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := traces.ConfigFromEnv(tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Error(diff)
			}
		})
	}
	if traces.Configured(env()) || !traces.Configured(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c")) {
		t.Error("Configured")
	}
}

// BenchmarkExport exports batches of 512 chat-turn-like spans (a turn span with 12 attributes,
// a model span with 5) to a receiver that drops them: ours against the OpenTelemetry
// project's OTLP/HTTP exporter.
func BenchmarkExport(b *testing.B) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("svc")
	for range 256 {
		ctx, turn := tr.Start(context.Background(), "chat turn", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("svc.session.id", "ses_0123456789abcdef"), attribute.String("svc.agent", "hello"),
			attribute.String("svc.agent_id", "agt_0123456789"), attribute.String("svc.deploy_id", "dep_0123456789"),
			attribute.String("svc.auth.method", "runtime_token"), attribute.String("gen_ai.request.model", "gpt-4o-mini"),
			attribute.String("gen_ai.provider.name", "openai"), attribute.String("svc.meta.userId", "u-1")))
		_, model := tr.Start(ctx, "chat gpt-4o-mini", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
			attribute.String("gen_ai.request.model", "gpt-4o-mini")))
		model.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", 120), attribute.Int("gen_ai.usage.output_tokens", 33))
		model.End()
		turn.SetAttributes(attribute.String("svc.done.reason", "stop"), attribute.Int("svc.turns", 1),
			attribute.Int("gen_ai.usage.input_tokens", 120), attribute.Int("gen_ai.usage.output_tokens", 33))
		turn.End()
	}
	ss := rec.Ended()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer sink.Close()
	run := func(b *testing.B, exp sdktrace.SpanExporter) {
		b.ReportAllocs()
		for b.Loop() {
			if err := exp.ExportSpans(b.Context(), ss); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ss)), "ns/span")
		_ = exp.Shutdown(context.Background())
	}
	b.Run("svc", func(b *testing.B) {
		exp, err := traces.NewExporter(traces.Config{URL: sink.URL + "/v1/traces"})
		if err != nil {
			b.Fatal(err)
		}
		run(b, exp)
	})
	b.Run("otlptracehttp", func(b *testing.B) {
		exp, err := otlptracehttp.New(b.Context(), otlptracehttp.WithEndpointURL(sink.URL+"/v1/traces"))
		if err != nil {
			b.Fatal(err)
		}
		run(b, exp)
	})
}
