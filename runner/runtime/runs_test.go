package runtime_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/memstore"
	"svc/runner/turn"
)

// Every turn on the platform's store is recorded as a run with the save of its result: a chat
// that ends (with the verified caller, the model, the usage, the trace id and the session's
// metadata, which cannot pass for the verified user), one whose client leaves (user_abort) and
// one an eval runs (kind eval). Deleting the session deletes its runs.
func TestRunsRecorded(t *testing.T) {
	db := dbtest.SQLite(t)
	srv := modelstest.NewOpenAIServer(t,
		modelstest.Turn{Text: []string{"hello ", "there"}, Usage: modelstest.Usage{InputTokens: 12, OutputTokens: 3}},
		modelstest.Turn{Text: []string{"partial "}, Hang: true},
		modelstest.Turn{Text: []string{"eval answer"}})
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	sg := newSigner(t)
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, DeployID: "dtest", Verifier: sg.s,
		Sessions: dbstore.New(db), SharedStore: true, Tracer: tp.Tracer("test"),
		Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	runs := registry.NewRuns(db)
	list := func(q registry.RunQuery) []registry.Run {
		t.Helper()
		rs, err := runs.List(context.Background(), agentID, q)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}

	// 1. A chat that ends.
	token := sg.token(agentID, "u-verified", "")
	fs := e.chat(token, map[string]any{"message": "hi", "metadata": map[string]string{"userId": "u1", "screen": "home", "svc.user.id": "mallory"}})
	id := sessionOf(t, fs)
	d := done(t, fs)
	rs := list(registry.RunQuery{UserKey: "u1"})
	if len(rs) != 1 {
		t.Fatalf("runs of userId u1: %+v", rs)
	}
	r := rs[0]
	if r.SessionID != id || r.AgentID != agentID || r.DeployID != "dtest" || r.Kind != "chat" || r.Reason != "model_stop" ||
		r.Provider != "openai" || r.Model != "gpt-4o" || r.Steps != 1 || r.Usage.InputTokens != 12 || r.Usage.OutputTokens != 3 {
		t.Errorf("run %+v", r)
	}
	if r.UserID != "u-verified" || r.AuthMethod != runtime.MethodRuntimeToken || r.Metadata["svc.user.id"] != "mallory" || r.Metadata["screen"] != "home" {
		t.Errorf("run's caller %q %q, metadata %v: metadata must not set the verified user", r.UserID, r.AuthMethod, r.Metadata)
	}
	if r.TraceID == "" || r.TraceID != str(d["trace_id"]) {
		t.Errorf("run's trace id %q, done frame's %v", r.TraceID, d["trace_id"])
	}
	if r.EndedAt.Before(r.StartedAt) || r.StartedAt.IsZero() {
		t.Errorf("run from %v to %v", r.StartedAt, r.EndedAt)
	}

	// 2. A client that leaves mid-answer: user_abort.
	resp, err := e.srv.Client().Do(e.request("POST", "/chat/stream", token, map[string]any{"message": "more", "session_id": id, "metadata": map[string]string{"screen": "cart"}}))
	if err != nil {
		t.Fatal(err)
	}
	readFrames(t, resp.Body, 2) // init, text_delta: the model now hangs
	resp.Body.Close()
	// The turn ends on its own goroutine, and its run is written with the session's last save,
	// which may come after the live session reads idle: wait for the run itself.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if r := e.do("GET", "/sessions/history/"+id, token, nil); r.Status == 200 && r.JSON["status"] == "idle" && len(list(registry.RunQuery{Screen: "cart"})) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the aborted turn did not end")
		}
	}
	if rs := list(registry.RunQuery{Screen: "cart"}); len(rs) != 1 || rs[0].Reason != "user_abort" || rs[0].SessionID != id || rs[0].Metadata["userId"] != "u1" {
		t.Errorf("runs on screen cart: %+v", rs)
	}

	// 3. An eval's turn.
	evalSession, _, err := e.rt.RunTurn(context.Background(), runtime.EvalTurn{Message: "check", Metadata: map[string]string{"source": "eval"}})
	if err != nil {
		t.Fatal(err)
	}
	if rs := list(registry.RunQuery{SessionID: evalSession}); len(rs) != 1 || rs[0].Kind != "eval" || rs[0].Reason != "model_stop" || rs[0].AuthMethod != runtime.MethodInternal {
		t.Errorf("eval runs: %+v", rs)
	}
	if rs := list(registry.RunQuery{}); len(rs) != 3 || rs[0].SessionID != evalSession {
		t.Errorf("all runs, newest first: %+v", rs)
	}

	// Deleting a session deletes its runs.
	if r := e.do("DELETE", "/sessions/history/"+id, token, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if rs := list(registry.RunQuery{}); len(rs) != 1 || rs[0].SessionID != evalSession {
		t.Errorf("runs after the session was deleted: %+v", rs)
	}
}

// A turn its process left running is recorded as an interrupted run when it is ended: by a
// restart's sweep (turn.RecoverInterrupted) or by the next turn on its session, from what the
// session kept of it when it began (State.Run); a session stored before runs were kept is
// recorded from what it knows.
func TestInterruptedRunsRecorded(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	store := dbstore.New(db)
	began := time.Now().Add(-time.Hour).UTC().Truncate(time.Second) // before the next turn's start
	now := began.Add(time.Minute)
	left := func(id string, run *sessions.Run) {
		s := &sessions.Session{ID: id, AgentID: agentID, Owner: "u-owner", DeployID: "dfirst", Status: sessions.StatusRunning,
			Metadata: map[string]string{"userId": "u1", "screen": "home"}, CreatedAt: began, UpdatedAt: began,
			Messages: []sessions.Entry{{Message: models.Message{Role: models.RoleUser, Content: "tell me a story"}, At: began}}}
		s.State.Partial, s.State.Run = "Once upon", run
		if err := store.Save(ctx, s, 0); err != nil {
			t.Fatal(err)
		}
	}
	left("ses_swept", &sessions.Run{ID: "run_swept", AgentID: agentID, DeployID: "dlast", SessionID: "ses_swept", Kind: sessions.RunChat,
		StartedAt: began, Provider: "openai", Model: "gpt-4o", UserID: "u-verified", AuthMethod: runtime.MethodRuntimeToken})
	left("ses_legacy", nil)
	n, err := turn.RecoverInterrupted(ctx, store, &memstore.Locks{}, func() time.Time { return now })
	if err != nil || n != 2 {
		t.Fatalf("recovered %d, %v; want 2", n, err)
	}
	runs := registry.NewRuns(db)
	r, err := runs.Get(ctx, agentID, "run_swept")
	if err != nil {
		t.Fatal(err)
	}
	if r.Reason != sessions.RunInterrupted || r.DeployID != "dlast" || r.UserID != "u-verified" || r.Model != "gpt-4o" ||
		!r.StartedAt.Equal(began) || !r.EndedAt.Equal(now) || r.Metadata["userId"] != "u1" {
		t.Errorf("swept run %+v", r)
	}
	rs, err := runs.List(ctx, agentID, registry.RunQuery{SessionID: "ses_legacy"})
	if err != nil || len(rs) != 1 {
		t.Fatalf("legacy session's runs %+v, %v", rs, err)
	}
	if r := rs[0]; r.Reason != sessions.RunInterrupted || r.DeployID != "dfirst" || r.UserID != "u-owner" || !r.StartedAt.Equal(began) || r.Metadata["screen"] != "home" {
		t.Errorf("legacy session's run %+v", r)
	}
	if s, err := store.Load(ctx, "ses_swept"); err != nil || s.State.Run != nil {
		t.Errorf("the swept session keeps its ended run: %+v, %v", s, err)
	}

	// The next turn on a session left running records the run it ends, then its own.
	left("ses_next", &sessions.Run{ID: "run_dead", AgentID: agentID, SessionID: "ses_next", Kind: sessions.RunChat, StartedAt: began})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: agentID, Sessions: store, SharedStore: true,
		DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	e.chat("", map[string]any{"message": "go on", "session_id": "ses_next"})
	rs, err = runs.List(ctx, agentID, registry.RunQuery{SessionID: "ses_next"})
	if err != nil || len(rs) != 2 {
		t.Fatalf("runs of ses_next %+v, %v", rs, err)
	}
	if rs[0].Reason != "model_stop" || rs[0].Model != "echo" || rs[1].ID != "run_dead" || rs[1].Reason != sessions.RunInterrupted {
		t.Errorf("runs of ses_next, newest first: %+v", rs)
	}
}
