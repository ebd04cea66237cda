package runtime_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"svc/runner/runtime"
)

// A turn is a span with the caller, the session's metadata under svc.meta.* and the done reason;
// its model and tool calls are child spans with the GenAI attributes; done carries the trace id.
// A metadata key cannot pose as the verified user.
func TestTurnTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(t.Context())
	sg := newSigner(t)
	keys := newKeys(t)
	key := keys.create(t, "agt_t")
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), AgentID: "agt_t", Verifier: sg.s, Keys: keys.checker, Tracer: tp.Tracer("svc/runner")})
	token := sg.token("agt_t", "user-7", "")
	fs := e.chat(token, map[string]any{"message": `/tool store__tickets__get {"key": "acme-1"}`,
		"metadata": map[string]string{"userId": "u1", "screen": "home", "svc.user.id": "mallory"}})
	traceID := str(done(t, fs)["trace_id"])
	spans := rec.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	root, model, tool := byName["chat turn"], byName["chat echo"], byName["execute_tool store__tickets__get"]
	if root == nil || model == nil || tool == nil {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("spans %v", names)
	}
	if traceID == "" || root.SpanContext().TraceID().String() != traceID {
		t.Errorf("done trace_id %q, span trace %s", traceID, root.SpanContext().TraceID())
	}
	for _, child := range []sdktrace.ReadOnlySpan{model, tool} {
		if child.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("%s is not a child of the turn", child.Name())
		}
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		out := map[string]string{}
		for _, kv := range s.Attributes() {
			out[string(kv.Key)] = kv.Value.Emit()
		}
		return out
	}
	ra := attrs(root)
	for k, want := range map[string]string{
		"svc.user.id": "user-7", "svc.auth.method": "runtime_token", "svc.meta.userId": "u1", "svc.meta.screen": "home",
		"svc.meta.svc.user.id": "mallory", "svc.agent_id": "agt_t", "svc.done.reason": "model_stop", "svc.agent": "default",
	} {
		if ra[k] != want {
			t.Errorf("turn span %s = %q, want %q", k, ra[k], want)
		}
	}
	if ma := attrs(model); ma["gen_ai.operation.name"] != "chat" || ma["gen_ai.request.model"] != "echo" || ma["gen_ai.usage.input_tokens"] == "" {
		t.Errorf("model span %v", ma)
	}
	if ta := attrs(tool); ta["gen_ai.operation.name"] != "execute_tool" || ta["gen_ai.tool.name"] != "store__tickets__get" {
		t.Errorf("tool span %v", ta)
	}
	for _, s := range spans { // no message text in any attribute
		for _, kv := range s.Attributes() {
			if kv.Value.Type() == attribute.STRING && strings.Contains(kv.Value.AsString(), "acme-1") {
				t.Errorf("span %s records call content in %s", s.Name(), kv.Key)
			}
		}
	}
	// An agent API key is a trusted service: svc.auth.method api_key, no user.
	done(t, e.chat(key, map[string]any{"message": "hi"}))
	var keyed sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "chat turn" && s != root {
			keyed = s
		}
	}
	if keyed == nil {
		t.Fatal("no span of the keyed turn")
	}
	if ka := attrs(keyed); ka["svc.auth.method"] != "api_key" || ka["svc.user.id"] != "" {
		t.Errorf("keyed turn span: svc.auth.method %q, svc.user.id %q; want api_key and none", ka["svc.auth.method"], ka["svc.user.id"])
	}
}
