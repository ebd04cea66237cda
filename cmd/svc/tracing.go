package main

import (
	"context"
	"fmt"
	"os"

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
// nothing is traced or costs anything. shutdown flushes what is buffered.
func newTracer(ctx context.Context, role string) (trace.Tracer, func(context.Context) error, error) {
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
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(traces.NewBatcher(exp, bcfg)), sdktrace.WithResource(res))
	return tp.Tracer("svc"), tp.Shutdown, nil
}
