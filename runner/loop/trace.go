package loop

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"svc/runner/models"
)

// Span attributes of the OpenTelemetry GenAI semantic conventions.
const (
	attrOperation    = attribute.Key("gen_ai.operation.name")
	attrProvider     = attribute.Key("gen_ai.provider.name")
	attrModel        = attribute.Key("gen_ai.request.model")
	attrInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	attrToolName     = attribute.Key("gen_ai.tool.name")
	attrToolCallID   = attribute.Key("gen_ai.tool.call.id")
)

// startModelSpan starts the span of one model call (operation "chat", or "summarize" for a
// compaction), nil when nothing is traced; endModelSpan ends it. Message text is never recorded.
//
//go:noinline (off the model call's frame, which stays on the stack while the model streams)
func (r *run) startModelSpan(operation string) trace.Span {
	if r.p.Tracer == nil {
		return nil // untraced: not even the attributes are built
	}
	_, span := r.p.Tracer.Start(r.ctx, operation+" "+r.p.Model, trace.WithSpanKind(trace.SpanKindClient))
	return span
}

// endModelSpan sets the model span's attributes, all at once (the SDK then sizes its attribute
// array once), from an array of spanAttrs (the SDK copies them), and its error, and ends it.
//
//go:noinline (as startModelSpan)
func (r *run) endModelSpan(span trace.Span, operation string, u models.Usage, err error) {
	if span == nil {
		return
	}
	a := spanAttrs.Get().(*[5]attribute.KeyValue)
	*a = [...]attribute.KeyValue{attrOperation.String(operation), attrProvider.String(r.p.ProviderName),
		attrModel.String(r.p.Model), attrInputTokens.Int(u.InputTokens), attrOutputTokens.Int(u.OutputTokens)}
	span.SetAttributes(a[:]...)
	*a = [5]attribute.KeyValue{}
	spanAttrs.Put(a)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// spanAttrs are the arrays model spans' attributes are built in: one in every run would be 320
// bytes more for each open stream.
var spanAttrs = sync.Pool{New: func() any { return new([5]attribute.KeyValue) }}

// startToolSpan starts the span of one tool call; its context carries the span to the tool, so
// that what the tool does (a handler's children, a subagent's model calls) nests under it.
func (r *run) startToolSpan(name, id string) (context.Context, func(isError bool, err error)) {
	if r.p.Tracer == nil {
		return r.ctx, func(bool, error) {}
	}
	ctx, span := r.p.Tracer.Start(r.ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrOperation.String("execute_tool"), attrToolName.String(name), attrToolCallID.String(id)))
	return ctx, func(isError bool, err error) {
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case isError:
			span.SetStatus(codes.Error, "the tool returned an error result")
		}
		span.End()
	}
}
