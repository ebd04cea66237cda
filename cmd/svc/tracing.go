package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"svc/traces"
)

// newTracer returns the process's tracer when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set: spans go over OTLP/HTTP (protobuf), batched by the
// SDK and posted by package traces, with the standard OTEL_* settings (headers, timeout,
// compression, certificates, sampler, batching). Without them it returns nil, and
// nothing is traced or costs anything. shutdown flushes what is buffered. With reg, the span
// export's counters are registered on it (svc_trace_spans_exported_total,
// svc_trace_spans_dropped_total, svc_trace_export_failures_total).
func newTracer(ctx context.Context, role string, reg prometheus.Registerer) (trace.Tracer, func(context.Context) error, error) {
	if !traces.Configured(os.LookupEnv) {
		return nil, func(context.Context) error { return nil }, nil
	}
	cfg, err := traces.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return nil, nil, err
	}
	bcfg, err := traces.BatchConfigFromEnv(os.LookupEnv)
	if err != nil {
		return nil, nil, err
	}
	exp, err := traces.NewExporter(cfg)
	if err != nil {
		return nil, nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("svc"), semconv.ServiceVersion(version),
		semconv.ServiceInstanceID(role+"-"+fmt.Sprint(os.Getpid()))))
	if err != nil {
		return nil, nil, err
	}
	b := traces.NewBatcher(exp, bcfg)
	if reg != nil {
		counter := func(name, help string, n func() int64) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(n()) })
		}
		if err := errors.Join(
			reg.Register(counter("svc_trace_spans_exported_total", "Spans sent to the OTLP receiver in exports it accepted.", b.Exported)),
			reg.Register(counter("svc_trace_spans_dropped_total", "Spans dropped because OTEL_BSP_MAX_QUEUE_SIZE spans were already waiting for export.", b.Dropped)),
			reg.Register(counter("svc_trace_export_failures_total", "Span exports that failed after their retries; their spans are lost.", b.Failed)),
		); err != nil {
			_ = b.Shutdown(ctx)
			return nil, nil, err
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithResource(res))
	return tp.Tracer("svc"), tp.Shutdown, nil
}
