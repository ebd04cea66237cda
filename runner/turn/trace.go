package turn

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"svc/runner/loop"
)

// turnSpan is a turn's span and what its attributes need from the turn's start.
type turnSpan struct {
	trace.Span
	agent string // the agent the turn began as (a handoff changes t.prof)
}

// attrPool holds the slices the spans' attributes are built in: the SDK copies what
// SetAttributes is given, so one slice serves turn after turn.
var attrPool = sync.Pool{New: func() any { s := make([]attribute.KeyValue, 0, 32); return &s }}

// startSpan starts the turn's span when the Engine has a Tracer. Its attributes are set when it
// ends (endSpan), all at once: the SDK then sizes its attribute array once instead of copying
// the start's attributes and growing them at the end.
func (t *Turn) startSpan(ctx context.Context) (context.Context, turnSpan) {
	tr := t.e.cfg.Tracer
	if tr == nil {
		return ctx, turnSpan{}
	}
	ctx, span := tr.Start(ctx, "chat turn", trace.WithSpanKind(trace.SpanKindServer))
	return ctx, turnSpan{Span: span, agent: t.prof.name()}
}

// endSpan ends the turn's span and returns its trace id for the done frame ("" when nothing is
// traced or the turn is not sampled). The span carries the session, agent and deployment, the
// verified caller (svc.user.id, svc.user.org_id, svc.auth.method), each metadata key as svc.meta.<key> (metadata
// can never set the svc.user.* or svc.auth.* attributes, which come from the credential only),
// the model, the done reason and the usage. Message text is not recorded.
func (t *Turn) endSpan(span turnSpan, res loop.Result) string {
	if span.Span == nil {
		return ""
	}
	p := attrPool.Get().(*[]attribute.KeyValue)
	attrs := append((*p)[:0],
		attribute.String("svc.session.id", t.l.ID),
		attribute.String("svc.agent", span.agent),
		attribute.String("svc.agent_id", t.e.cfg.AgentID),
		attribute.String("svc.deploy_id", t.e.cfg.DeployID),
		attribute.String("svc.auth.method", string(t.method)),
		attribute.String("gen_ai.request.model", t.ref.Model),
		attribute.String("gen_ai.provider.name", t.ref.Provider),
		attribute.String("svc.done.reason", string(res.Reason)),
		attribute.Int("svc.turns", res.Turns),
		attribute.Int("gen_ai.usage.input_tokens", res.Usage.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", res.Usage.OutputTokens),
	)
	if t.userID != "" {
		attrs = append(attrs, attribute.String("svc.user.id", t.userID))
	}
	if t.orgID != "" {
		attrs = append(attrs, attribute.String("svc.user.org_id", t.orgID))
	}
	for k, v := range t.meta {
		attrs = append(attrs, attribute.String("svc.meta."+k, v))
	}
	span.SetAttributes(attrs...)
	clear(attrs)
	*p = attrs[:0]
	attrPool.Put(p)
	if res.Reason == loop.ReasonError {
		msg := "the turn failed"
		if res.Err != nil {
			msg = res.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
	return sampledTraceID(span.Span)
}
