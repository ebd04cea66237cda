package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"svc/runner/access"
	"svc/runner/loop"
	"svc/runner/sse"
	"svc/runner/streams"
	"svc/runner/tools"
	"svc/runner/turn"
)

// beginTurn validates a chat request and opens its turn (turn.Engine.Open: the session resolved
// under the tenancy rules of spec §4.6 and locked, the user's message stored). Every error is
// returned before anything is streamed.
func (rt *Runtime) beginTurn(ctx context.Context, who access.Identity, req *chatRequest) (*turn.Turn, error) {
	in, err := req.validate()
	if err != nil {
		return nil, err
	}
	if err := requireScope(rt.scopeRequired, who, req.ScopeID); err != nil {
		return nil, err
	}
	t, err := rt.turns.Open(ctx, turn.Start{
		SessionID: req.SessionID, New: req.settings(), Caller: who,
		Text: in.text, Parts: in.parts, Warnings: in.warnings,
		Metadata: req.Metadata, Context: req.Context, Attachments: in.files, Eval: req.eval,
	})
	if err != nil {
		return nil, err
	}
	noteSession(ctx, t.SessionID())
	return t, nil
}

// sseSink writes frames to an SSE response, which tees them to the turn's log; a failed
// write cancels the turn, unless it continues without its client (keep): then the log alone
// takes the frames, numbered on.
type sseSink struct {
	w      *sse.Writer
	cancel context.CancelCauseFunc
	keep   bool
	log    streams.Writer
	now    func() time.Time
	gone   bool // keep, and the client left
	seq    int64
	buf    []byte
}

// Emit implements loop.Sink.
func (s *sseSink) Emit(f *sse.Frame) error {
	if !s.gone {
		err := s.w.Write(f)
		if err == nil {
			s.seq++ // the Writer's id of f
			return nil
		}
		if !s.keep {
			s.cancel(loop.ErrUserAbort)
			return err
		}
		s.gone = true
		if n := s.w.Seq(); n > s.seq { // the failed write numbered f, and the Writer's Tee logged it
			s.seq = n
			return nil
		}
	}
	s.seq++
	s.buf = sse.AppendJSON(s.buf[:0], f, s.now())
	s.log.Append(s.seq, s.buf)
	return nil
}

// chatStream serves POST /chat and /chat/stream: the turn as SSE frames.
func (rt *Runtime) chatStream(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var req chatRequest
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	t, err := rt.beginTurn(r.Context(), who, &req)
	if err != nil {
		return err
	}
	rt.streamTurn(w, r, t, req.OnDisconnect, true, func(sw *sse.Writer, cancel context.CancelCauseFunc, keep bool, log streams.Writer) loop.Sink {
		return &sseSink{w: sw, cancel: cancel, keep: keep, log: log, now: rt.now}
	})
	return nil
}

// syncToolCall is one tool call of a /chat/sync answer.
type syncToolCall struct {
	ToolID   string `json:"tool_id"`
	ToolName string `json:"tool_name"`
	// ParentToolID is the tool call whose handler made this one (ctx.callTool); "" for the
	// model's calls. Children follow their parent in the list.
	ParentToolID string `json:"parent_tool_id,omitempty"`
	Parameters   any    `json:"parameters"`
	Status       string `json:"status,omitempty"`
	Result       any    `json:"result,omitempty"`
	Content      string `json:"content,omitempty"`
	Error        string `json:"error,omitempty"`
	DurationMS   int64  `json:"duration_ms"`
}

type syncDone struct {
	Reason  string    `json:"reason"`
	Turns   int       `json:"turns"`
	TraceID string    `json:"trace_id,omitempty"`
	Usage   sse.Usage `json:"usage"`
}

// syncAnswer is the body of /chat/sync (CONTRACT §6), with warnings and errors added.
type syncAnswer struct {
	SessionID string         `json:"session_id"`
	Text      string         `json:"text"`
	ToolCalls []syncToolCall `json:"tool_calls"`
	Warnings  []string       `json:"warnings,omitempty"`
	// InputRedacted is the user's message as the preInput guardrail left it, when it changed it.
	InputRedacted string   `json:"input_redacted,omitempty"`
	Errors        []string `json:"errors,omitempty"`
	Skills        []string `json:"skills_activated,omitempty"`
	Done          syncDone `json:"done"`
}

// syncSink collects a turn for /chat/sync. Frames come one at a time (the loop serialises them).
type syncSink struct {
	a    syncAnswer
	text strings.Builder
}

// Emit implements loop.Sink.
func (s *syncSink) Emit(f *sse.Frame) error {
	switch f.Type {
	case sse.TypeInit:
		s.a.SessionID = f.SessionID
	case sse.TypeTextDelta:
		s.text.WriteString(f.Content)
	case sse.TypeToolCallStart:
		s.a.ToolCalls = append(s.a.ToolCalls, syncToolCall{ToolID: f.ToolID, ToolName: f.ToolName, ParentToolID: f.ParentToolID, Parameters: rawOrNil(f.Parameters)})
	case sse.TypeToolCallResult:
		for i := range s.a.ToolCalls {
			if tc := &s.a.ToolCalls[i]; tc.ToolID == f.ToolID {
				tc.Status, tc.Result, tc.Content, tc.Error, tc.DurationMS = f.Status, rawOrNil(f.Result), f.Content, f.Error, f.DurationMS
			}
		}
	case sse.TypeWarning:
		s.a.Warnings = append(s.a.Warnings, f.Message)
	case sse.TypeInputRedacted:
		s.a.InputRedacted = f.Text
	case sse.TypeError:
		s.a.Errors = append(s.a.Errors, f.Message)
	case sse.TypeSkillActivated:
		s.a.Skills = append(s.a.Skills, f.SkillName)
	case sse.TypeDone:
		s.a.Done = syncDone{Reason: f.Reason, Turns: f.Turns, TraceID: f.TraceID}
		if f.Usage != nil {
			s.a.Done.Usage = *f.Usage
		}
	}
	return nil
}

func rawOrNil(b []byte) any {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return rawJSON(b)
}

// rawJSON marshals as itself when valid.
type rawJSON []byte

// MarshalJSON implements json.Marshaler.
func (r rawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// chatSync serves POST /chat/sync: the whole turn in one JSON answer.
func (rt *Runtime) chatSync(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var req chatRequest
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	t, err := rt.beginTurn(r.Context(), who, &req)
	if err != nil {
		return err
	}
	sink := &syncSink{}
	t.Run(r.Context(), sink)
	sink.a.Text = sink.text.String()
	if sink.a.ToolCalls == nil {
		sink.a.ToolCalls = []syncToolCall{}
	}
	writeJSON(w, http.StatusOK, sink.a)
	return nil
}

// scopeRequired reports whether svc.json's scope.requireScope applies: on local routes (svc dev,
// a runtime with no runtime-token verifier) only, spec 5.5. Hosted chat does not enforce it; the
// application backend authorizes scopes there.
func scopeRequired(o *Options) bool {
	sc := o.Agent.Config.Scope
	return o.Verifier == nil && sc != nil && sc.RequireScope
}

// requireScope refuses a request without a scope when required is set (scopeRequired).
func requireScope(required bool, who access.Identity, requested string) error {
	if !required {
		return nil
	}
	if scope, err := who.ScopeFor(requested); err != nil || scope != "" {
		return err
	}
	return invalid("scope_id", "is required: svc.json sets scope.requireScope")
}

// MethodInternal is the svc.auth.method of a turn the platform runs itself (RunTurn).
const MethodInternal = "internal"

// collectSink keeps a copy of every frame of a turn.
type collectSink struct{ frames []sse.Frame }

// Emit implements loop.Sink.
func (s *collectSink) Emit(f *sse.Frame) error {
	s.frames = append(s.frames, *f) // the loop reuses its delta frame: keep a copy
	return nil
}

// EvalTurn is a turn an eval runs (RunTurn).
type EvalTurn struct {
	Message          string
	Context          map[string]string
	Metadata         map[string]string
	MaxSessionTokens int // 0: the deployment's own limit
	// AllowWrites names the connections the eval lets the agent write to ("*": all); without
	// them every mutating connection call is refused.
	AllowWrites []string
}

// RunTurn runs an eval's message as the first turn of a new session, in this process, as a
// trusted caller of the platform itself: the session is stored as any other and readable
// through the history routes. Connection writes need the eval's permission, and a durable run
// the turn starts is cancelled at its first pause. It returns the session id and every frame of
// the turn; an error is a turn that could not start (an invalid request, a store that fails).
func (rt *Runtime) RunTurn(ctx context.Context, et EvalTurn) (string, []sse.Frame, error) {
	message := et.Message
	req := &chatRequest{Message: &message, Context: et.Context, Metadata: et.Metadata,
		eval: &tools.EvalPolicy{AllowWrites: et.AllowWrites}}
	if et.MaxSessionTokens > 0 {
		n := int64(et.MaxSessionTokens)
		req.MaxSessionTokens = &n
	}
	t, err := rt.beginTurn(ctx, access.Identity{Method: MethodInternal}, req)
	if err != nil {
		return "", nil, err
	}
	sink := &collectSink{}
	t.Run(ctx, sink)
	return t.SessionID(), sink.frames, nil
}
