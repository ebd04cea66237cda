package workers

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"svc/builder"
	"svc/registry"
)

// buildSpan starts the span of a build attempt, a child of the trace its task carries (the push
// or redeploy that started it); end records the outcome and a child span per step, placed one
// after the other from the attempt's start (steps report their durations, not their starts).
// Without a Tracer it does nothing.
func (h *BuildHandler) buildSpan(ctx context.Context, pl buildPayload, b registry.Build) (context.Context, func(steps []builder.Step, err error)) {
	tr := h.cfg.Tracer
	if tr == nil {
		return ctx, func([]builder.Step, error) {}
	}
	if len(pl.Trace) > 0 {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(pl.Trace))
	}
	start := time.Now()
	ctx, span := tr.Start(ctx, "build", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("svc.build.id", b.ID), attribute.String("svc.agent_id", b.AgentID),
		attribute.String("svc.deploy_id", b.DeployID), attribute.String("svc.environment", b.Environment),
		attribute.Int("svc.build.attempt", b.Attempts)))
	return ctx, func(steps []builder.Step, err error) {
		at := start
		for _, s := range steps {
			if s.Status == builder.StepSkipped {
				continue
			}
			_, ss := tr.Start(ctx, "build "+s.Name, trace.WithTimestamp(at), trace.WithAttributes(attribute.String("svc.build.step.status", s.Status)))
			at = at.Add(s.Duration)
			if s.Status == builder.StepFailed {
				ss.SetStatus(codes.Error, "step failed")
			}
			ss.End(trace.WithTimestamp(at))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
