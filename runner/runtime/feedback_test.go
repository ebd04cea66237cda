package runtime_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/runtime"
	"svc/runner/sessions/dbstore"
)

// POST /feedback with a trace_id rates the turn that had it: the trace must be one of this
// agent's turns (the run recorded with the turn's result), else 404, whether the trace id is
// made up or another agent's; with a session_id too, it must be that session's. The rating is
// kept on the trace's session. A malformed trace id is 400 naming trace_id.
func TestFeedbackTraceID(t *testing.T) {
	db := dbtest.SQLite(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	sg := newSigner(t)
	feedback := registry.NewFeedback(db)
	store := dbstore.New(db)
	mine := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, DeployID: "d1", Verifier: sg.s,
		Sessions: store, SharedStore: true, Tracer: tp.Tracer("test"), Feedback: feedback})
	theirs := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: "ag_theirs", DeployID: "d2", Verifier: sg.s,
		Sessions: store, SharedStore: true, Tracer: tp.Tracer("test"), Feedback: feedback})
	token := sg.token(agentID, "u1", "")

	turn := func(e *env, token string, body map[string]any) (session, trace string) {
		t.Helper()
		fs := e.chat(token, body)
		d := done(t, fs)
		trace = str(d["trace_id"])
		if len(trace) != 32 {
			t.Fatalf("done %v: no trace id", d)
		}
		return sessionOf(t, fs), trace
	}
	s1, t1 := turn(mine, token, map[string]any{"message": "first", "metadata": map[string]string{"screen": "home"}})
	s2, _ := turn(mine, token, map[string]any{"message": "second"})
	_, t3 := turn(mine, token, map[string]any{"message": "again", "session_id": s1})
	_, other := turn(theirs, sg.token("ag_theirs", "u1", ""), map[string]any{"message": "elsewhere"})

	rate := func(body map[string]any) *response {
		t.Helper()
		return mine.do("POST", "/feedback", token, body)
	}
	for _, tt := range []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"unknown trace", map[string]any{"trace_id": "0123456789abcdef0123456789abcdef", "rating": "up"}, 404},
		{"another agent's trace", map[string]any{"trace_id": other, "rating": "up"}, 404},
		{"another session's trace", map[string]any{"session_id": s2, "trace_id": t1, "rating": "up"}, 404},
		{"malformed trace", map[string]any{"trace_id": "not-a-trace", "rating": "up"}, 400},
		{"upper-case trace", map[string]any{"trace_id": "0123456789ABCDEF0123456789ABCDEF", "rating": "up"}, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := rate(tt.body)
			if r.Status != tt.status || r.JSON["field"] != "trace_id" {
				t.Errorf("POST /feedback %v = %d %s, want %d naming trace_id", tt.body, r.Status, r.Body, tt.status)
			}
		})
	}

	// A trace of this agent's: 201, kept on the trace's session with its metadata; the
	// session's second turn too, alone or with its session.
	for _, body := range []map[string]any{
		{"trace_id": t1, "rating": "down", "comment": "wrong"},
		{"trace_id": t3, "session_id": s1, "rating": "up"},
	} {
		if r := rate(body); r.Status != 201 {
			t.Fatalf("POST /feedback %v = %d %s", body, r.Status, r.Body)
		}
	}
	got, err := feedback.List(context.Background(), agentID, registry.FeedbackQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("feedback %+v, want the two ratings", got)
	}
	for _, f := range got {
		if f.SessionID != s1 || f.Metadata["screen"] != "home" || (f.TraceID != t1 && f.TraceID != t3) {
			t.Errorf("feedback %+v, want it on %s with its metadata", f, s1)
		}
	}

	// Another user who cannot see the session cannot rate its turn either.
	if r := mine.do("POST", "/feedback", sg.token(agentID, "u2", ""), map[string]any{"trace_id": t1, "rating": "up"}); r.Status != 404 {
		t.Errorf("a trace of a session the caller cannot see: %d %s", r.Status, r.Body)
	}
}

// Under svc dev (sessions in memory) a trace id is checked the same way.
func TestFeedbackTraceIDInMemory(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Tracer: tp.Tracer("test")})
	trace := str(done(t, e.chat("", map[string]any{"message": "hi"}))["trace_id"])
	if r := e.do("POST", "/feedback", "", map[string]any{"trace_id": trace, "rating": "up"}); r.Status != 201 {
		t.Errorf("a real trace: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/feedback", "", map[string]any{"trace_id": "0123456789abcdef0123456789abcdef", "rating": "up"}); r.Status != 404 {
		t.Errorf("an unknown trace: %d %s", r.Status, r.Body)
	}
}
