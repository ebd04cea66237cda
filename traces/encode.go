package traces

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The encoder writes an OTLP ExportTraceServiceRequest (opentelemetry/proto/collector/trace/v1)
// field by field from the SDK's read-only spans, as the OpenTelemetry exporter's tracetransform
// and proto.Marshal would, without building the message tree first. A test decodes what it writes
// next to what the OpenTelemetry exporter sends for the same spans and compares the two.

// Field numbers of the OTLP trace protocol (opentelemetry-proto v1).
const (
	fRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fResourceSpansResource   = 1
	fResourceSpansScopeSpans = 2
	fResourceSpansSchemaURL  = 3

	fResourceAttributes = 1

	fScopeSpansScope     = 1
	fScopeSpansSpans     = 2
	fScopeSpansSchemaURL = 3

	fScopeName       = 1
	fScopeVersion    = 2
	fScopeAttributes = 3

	fSpanTraceID           = 1
	fSpanSpanID            = 2
	fSpanTraceState        = 3
	fSpanParentSpanID      = 4
	fSpanName              = 5
	fSpanKind              = 6
	fSpanStart             = 7
	fSpanEnd               = 8
	fSpanAttributes        = 9
	fSpanDroppedAttributes = 10
	fSpanEvents            = 11
	fSpanDroppedEvents     = 12
	fSpanLinks             = 13
	fSpanDroppedLinks      = 14
	fSpanStatus            = 15
	fSpanFlags             = 16

	fEventTime              = 1
	fEventName              = 2
	fEventAttributes        = 3
	fEventDroppedAttributes = 4

	fLinkTraceID           = 1
	fLinkSpanID            = 2
	fLinkAttributes        = 4
	fLinkDroppedAttributes = 5
	fLinkFlags             = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKvlist = 6
	fAnyBytes  = 7

	fListValues = 1 // ArrayValue.values and KeyValueList.values

	// SpanFlags: the W3C trace flags in the low byte, and that the parent's remoteness is known.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// begin opens an embedded message field: its tag and a one-byte length to be fixed by end.
func begin(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return append(b, 0), len(b)
}

// end writes the length of the message opened at mark, moving its body when the length takes
// more than one byte.
func end(b []byte, mark int) []byte {
	n := len(b) - mark - 1
	if n < 0x80 {
		b[mark] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[mark+k:], b[mark+1:mark+1+n])
	protowire.AppendVarint(b[mark:mark], uint64(n))
	return b
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

// appendRequest appends the ExportTraceServiceRequest of spans: one ResourceSpans per resource,
// one ScopeSpans per instrumentation scope in it, in the order they first appear.
func (e *Exporter) appendRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	type scoped struct {
		res   *resource.Resource
		scope instrumentation.Scope
		spans []sdktrace.ReadOnlySpan
	}
	var groups []scoped
	for _, s := range spans {
		if s == nil {
			continue
		}
		res, scope := s.Resource(), s.InstrumentationScope()
		i := 0
		for i < len(groups) && (groups[i].res != res || groups[i].scope != scope) {
			i++
		}
		if i == len(groups) {
			groups = append(groups, scoped{res: res, scope: scope})
		}
		groups[i].spans = append(groups[i].spans, s)
	}
	taken := make([]bool, len(groups))
	for i, g := range groups {
		if taken[i] {
			continue // written with an earlier group of its resource
		}
		var mark int
		b, mark = begin(b, fRequestResourceSpans)
		if g.res != nil {
			b = append(b, e.resource(g.res)...)
		}
		for j := i; j < len(groups); j++ {
			if groups[j].res == g.res {
				b = appendScopeSpans(b, groups[j].scope, groups[j].spans)
				taken[j] = true
			}
		}
		if g.res != nil {
			b = appendString(b, fResourceSpansSchemaURL, g.res.SchemaURL())
		}
		b = end(b, mark)
	}
	return b
}

// resource returns the encoded Resource field of a ResourceSpans, kept for the next batch: a
// process has one resource.
func (e *Exporter) resource(res *resource.Resource) []byte {
	if enc, ok := e.resources[res]; ok {
		return enc
	}
	b, mark := begin(nil, fResourceSpansResource)
	for it := res.Iter(); it.Next(); {
		b = appendKeyValue(b, fResourceAttributes, it.Attribute())
	}
	b = end(b, mark)
	if e.resources == nil {
		e.resources = make(map[*resource.Resource][]byte)
	}
	e.resources[res] = b
	return b
}

func appendScopeSpans(b []byte, scope instrumentation.Scope, spans []sdktrace.ReadOnlySpan) []byte {
	b, mark := begin(b, fResourceSpansScopeSpans)
	if scope != (instrumentation.Scope{}) {
		var m int
		b, m = begin(b, fScopeSpansScope)
		b = appendString(b, fScopeName, scope.Name)
		b = appendString(b, fScopeVersion, scope.Version)
		for it := scope.Attributes.Iter(); it.Next(); {
			b = appendKeyValue(b, fScopeAttributes, it.Attribute())
		}
		b = end(b, m)
	}
	for _, s := range spans {
		b = appendSpan(b, s)
	}
	b = appendString(b, fScopeSpansSchemaURL, scope.SchemaURL)
	return end(b, mark)
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	b, mark := begin(b, fScopeSpansSpans)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = protowire.AppendTag(b, fSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = protowire.AppendTag(b, fSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	if sc.TraceState().Len() > 0 {
		b = appendString(b, fSpanTraceState, sc.TraceState().String())
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = protowire.AppendTag(b, fSpanParentSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, psid[:])
	}
	b = appendString(b, fSpanName, s.Name())
	b = appendUint(b, fSpanKind, spanKind(s.SpanKind()))
	b = appendFixed64(b, fSpanStart, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, fSpanEnd, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, fSpanAttributes, kv)
	}
	b = appendUint(b, fSpanDroppedAttributes, clampUint32(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		var m int
		b, m = begin(b, fSpanEvents)
		b = appendFixed64(b, fEventTime, unixNano(ev.Time.UnixNano()))
		b = appendString(b, fEventName, ev.Name)
		for _, kv := range ev.Attributes {
			b = appendKeyValue(b, fEventAttributes, kv)
		}
		b = appendUint(b, fEventDroppedAttributes, clampUint32(ev.DroppedAttributeCount))
		b = end(b, m)
	}
	b = appendUint(b, fSpanDroppedEvents, clampUint32(s.DroppedEvents()))
	for _, l := range s.Links() {
		var m int
		b, m = begin(b, fSpanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = protowire.AppendTag(b, fLinkTraceID, protowire.BytesType)
		b = protowire.AppendBytes(b, ltid[:])
		b = protowire.AppendTag(b, fLinkSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, lsid[:])
		for _, kv := range l.Attributes {
			b = appendKeyValue(b, fLinkAttributes, kv)
		}
		b = appendUint(b, fLinkDroppedAttributes, clampUint32(l.DroppedAttributeCount))
		b = appendFixed32(b, fLinkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = end(b, m)
	}
	b = appendUint(b, fSpanDroppedLinks, clampUint32(s.DroppedLinks()))
	var m int
	b, m = begin(b, fSpanStatus) // always present, as the OpenTelemetry exporter sends it
	st := s.Status()
	b = appendString(b, fStatusMessage, st.Description)
	b = appendUint(b, fStatusCode, statusCode(st.Code))
	b = end(b, m)
	b = appendFixed32(b, fSpanFlags, spanFlags(sc.TraceFlags(), parent))
	return end(b, mark)
}

func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, mark := begin(b, num)
	b = appendString(b, fKeyValueKey, string(kv.Key))
	b = appendAnyValue(b, fKeyValueValue, kv.Value)
	return end(b, mark)
}

// appendAnyValue appends an AnyValue; its one field is written even when it holds a zero value,
// as a protobuf oneof is.
func appendAnyValue(b []byte, num protowire.Number, v attribute.Value) []byte {
	b, mark := begin(b, num)
	switch v.Type() {
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		b = protowire.AppendString(b, v.AsString())
	case attribute.BOOL:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, fAnyBytes, protowire.BytesType)
		b = protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		var m int
		b, m = begin(b, fAnyArray)
		for _, e := range sliceValues(v) {
			b = appendAnyValue(b, fListValues, e)
		}
		b = end(b, m)
	case attribute.MAP:
		var m int
		b, m = begin(b, fAnyKvlist)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, fListValues, kv)
		}
		b = end(b, m)
	case attribute.EMPTY:
	default:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		b = protowire.AppendString(b, "INVALID")
	}
	return end(b, mark)
}

// sliceValues returns the elements of a slice attribute as values.
func sliceValues(v attribute.Value) []attribute.Value {
	var out []attribute.Value
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, e := range v.AsBoolSlice() {
			out = append(out, attribute.BoolValue(e))
		}
	case attribute.INT64SLICE:
		for _, e := range v.AsInt64Slice() {
			out = append(out, attribute.Int64Value(e))
		}
	case attribute.FLOAT64SLICE:
		for _, e := range v.AsFloat64Slice() {
			out = append(out, attribute.Float64Value(e))
		}
	case attribute.STRINGSLICE:
		for _, e := range v.AsStringSlice() {
			out = append(out, attribute.StringValue(e))
		}
	case attribute.SLICE:
		out = v.AsSlice()
	}
	return out
}

func spanKind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func unixNano(ns int64) uint64 { return uint64(max(0, ns)) }

func clampUint32(v int) uint64 { return uint64(min(max(v, 0), math.MaxUint32)) }
