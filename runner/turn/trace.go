package turn

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"svc/runner/loop"
)

// Caller is who sent a turn's message: the verified user of a runtime token ("" for a trusted
// caller) and how the request was authenticated.
type Caller struct {
	UserID     string
	AuthMethod string
}

// startSpan starts the turn's span when the Engine has a Tracer: the session, agent and
// deployment, the verified caller (svc.user.id, svc.auth.method) and each metadata key as
// svc.meta.<key>; metadata can never set the svc.user.* or svc.auth.* attributes, which come
// from the credential only. Message text is not recorded.
func (t *Turn) startSpan(ctx context.Context) (context.Context, trace.Span) {
	tr := t.e.cfg.Tracer
	if tr == nil {
		return ctx, nil
	}
	attrs := make([]attribute.KeyValue, 0, 8+len(t.meta))
	attrs = append(attrs,
		attribute.String("svc.session.id", t.l.ID),
		attribute.String("svc.agent", t.prof.name()),
		attribute.String("svc.agent_id", t.e.cfg.AgentID),
		attribute.String("svc.deploy_id", t.e.cfg.DeployID),
		attribute.String("svc.auth.method", t.caller.AuthMethod),
		attribute.String("gen_ai.request.model", t.ref.Model),
		attribute.String("gen_ai.provider.name", t.ref.Provider),
	)
	if t.caller.UserID != "" {
		attrs = append(attrs, attribute.String("svc.user.id", t.caller.UserID))
	}
	for k, v := range t.meta {
		attrs = append(attrs, attribute.String("svc.meta."+k, v))
	}
	return tr.Start(ctx, "chat turn", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endSpan ends the turn's span with its done reason and usage, and returns its trace id for the
// done frame ("" when nothing is traced).
func endSpan(span trace.Span, res loop.Result) string {
	if span == nil {
		return ""
	}
	span.SetAttributes(
		attribute.String("svc.done.reason", string(res.Reason)),
		attribute.Int("svc.turns", res.Turns),
		attribute.Int("gen_ai.usage.input_tokens", res.Usage.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", res.Usage.OutputTokens),
	)
	if res.Reason == loop.ReasonError {
		msg := "the turn failed"
		if res.Err != nil {
			msg = res.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
	if sc := span.SpanContext(); sc.IsSampled() {
		return sc.TraceID().String()
	}
	return ""
}
