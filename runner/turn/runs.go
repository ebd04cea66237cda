package turn

import (
	"time"

	"go.opentelemetry.io/otel/trace"

	"svc/auth"
	"svc/runner/loop"
	"svc/runner/sessions"
)

// startRun is the record of the turn's run as it begins: kept on the session (State.Run) while
// the turn runs, so that a turn its process leaves running is still recorded (sessions.Interrupt).
// Called by setup, under the session's lock.
func (t *Turn) startRun(st *Start, now time.Time) *sessions.Run {
	kind := sessions.RunChat
	if st.Eval != nil {
		kind = sessions.RunEval
	}
	return &sessions.Run{
		ID: auth.NewID("run_"), AgentID: t.e.cfg.AgentID, DeployID: t.e.cfg.DeployID, SessionID: t.l.ID, Kind: kind,
		StartedAt: now, Provider: t.ref.Provider, Model: t.ref.Model,
		UserID: st.Caller.UserID, AuthMethod: string(st.Caller.Method),
	}
}

// endRun is the record of the turn's run as it ended at now with res: stored with the turn's
// result (live.Cache.PersistRun), in the same transaction on the platform's store. It is nil
// when the store keeps no runs.
func (t *Turn) endRun(res loop.Result, now time.Time, traceID string) *sessions.Run {
	if t.run == nil {
		return nil
	}
	r := *t.run
	r.EndedAt, r.Reason, r.Steps, r.TraceID = now, string(res.Reason), res.Turns, traceID
	r.Usage = sessions.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, CachedTokens: res.Usage.CachedTokens}
	r.Metadata = t.meta
	return &r
}

// sampledTraceID is the trace id of the turn's span when it is recorded (the one the done frame
// carries), "" when nothing is traced.
func sampledTraceID(span trace.Span) string {
	if span == nil {
		return ""
	}
	if sc := span.SpanContext(); sc.IsSampled() {
		return sc.TraceID().String()
	}
	return ""
}
