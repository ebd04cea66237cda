package turn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"svc/agent"
	"svc/auth"
	"svc/runner/access"
	"svc/runner/approvals"
	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
	"svc/runner/sse"
	"svc/runner/tools"
)

// MaxMetadataKeys bounds the metadata keys a session holds (spec §8).
const MaxMetadataKeys = 50

// Start is a message to run as a turn (Engine.Open).
type Start struct {
	// SessionID names the session to continue, or to create with that id when none exists; ""
	// creates a session with a new id.
	SessionID string
	// New are the settings of a session created for the turn.
	New Settings
	// Text and Parts are the user's message; Parts carry their content (Data).
	Text  string
	Parts []models.Part
	// Warnings are told to the client before the turn runs (attachments left out, say).
	Warnings []string
	// Caller is who sent the message: the sessions it may continue (access.Identity.Sees), the
	// owner and scope of one created for it, and the user recorded on the turn's span and run.
	Caller access.Identity
	// Attachments are the message's files as sent, for the turn's tools.
	Attachments []tools.Attachment
	// Metadata keys are set on the session (latest value per key); a non-nil Context replaces
	// the session's context.
	Metadata map[string]string
	Context  map[string]string
	// Eval marks a turn an eval runs (tools.Session.Eval); nil for every chat.
	Eval *tools.EvalPolicy
	// Provider, when set, answers this turn instead of the session's model: an automation's
	// tool action runs its call through the turn (tools.ScriptedCall) without a model.
	Provider models.Provider
}

// Turn is one chat turn between Open and the done frame of Run.
type Turn struct {
	// Cancel, when set before Run, cancels the ctx Run is given (the caller cancels it after
	// Run): the turn's loop cancels through it rather than through a context of its own.
	Cancel context.CancelCauseFunc

	e        *Engine
	l        *live.Session
	lock     Lock
	fresh    bool // the session's first turn: warnings and skill activation are announced
	prof     *Profile
	ref      agent.ModelRef
	provider models.Provider
	modelErr error
	warnings []string
	redacted string // the redacted text to announce, or ""
	queue    *loop.Queue
	input    []models.Message
	history  []models.Message
	summary  string
	base     int // State.SummaryUpTo when the turn began
	system   string
	context  map[string]string // the session's context when the turn began
	meta     map[string]string // the session's metadata when the turn began
	owner    string            // the session's owner and scope, for the durable runs it starts
	scope    string
	eval     *tools.EvalPolicy
	userID   string // the caller's verified user, organization and credential kind, for the span
	orgID    string
	method   access.Method // (the whole Identity would grow every Turn by its other fields)
	files    []tools.Attachment
	choice   agent.ModelRef // the session's model choice (spec 2.5), zero when none: for specialists
	budget   int
	used     int
	run      *sessions.Run // the run's record as it began (runs.go)
	ended    *sessions.Run // a run its process left running, which begin ended, or nil
}

// SessionID is the id of the turn's session.
func (t *Turn) SessionID() string { return t.l.ID }

// begin admits st's message, of size bytes (EntrySize; redacted by the guardrail), on session l whose turn Lock lk the
// caller holds, and stores it, so that history shows it even if the process dies. Every check
// that can refuse the message (an *Error) comes before its attachments are stored, so a refused
// message stores nothing; on any error the Lock is released. On success the Turn owns the Lock
// until Run or Abandon.
func (e *Engine) begin(ctx context.Context, l *live.Session, lk Lock, size int64, redacted bool, st *Start) (*Turn, error) {
	t := &Turn{e: e, l: l, lock: lk, queue: loop.NewQueue()}
	// The history the model will see is taken, and its attachments read back, before the
	// message's content goes to the session's blobs, apart from its history rows; then setup
	// cannot fail.
	l.Lock()
	// A turn its process left running (it died, or lost the lock) ends now, interrupted, with
	// what it had streamed: this turn holds the lock, so no other runs.
	t.ended = sessions.Interrupt(l.S, e.cfg.Now())
	err := t.admit(st, size)
	if err == nil {
		t.readHistory()
	}
	l.Unlock()
	if err == nil {
		t.history, err = e.loadParts(ctx, l.ID, t.history)
	}
	var kept []models.Part
	if err == nil {
		kept, err = e.storeParts(ctx, l.ID, st.Parts)
	}
	if err != nil {
		t.Abandon()
		return nil, err
	}
	t.files, t.userID, t.orgID, t.method, t.eval = st.Attachments, st.Caller.UserID, st.Caller.OrgID, st.Caller.Method, st.Eval
	t.setup(st, kept)
	if redacted {
		t.redacted = st.Text
	}
	// An eviction between lookup and lock must not orphan the running turn: its queue is
	// found through the cache.
	e.cfg.Cache.Insert(l)
	if err := e.cfg.Cache.PersistRun(ctx, l, t.ended); err != nil {
		t.Abandon()
		return nil, fmt.Errorf("store turn start: %w", err)
	}
	return t, nil
}

// admit checks, under l's mutex, what could refuse the message on the turn's session: its
// storage bound and the metadata keys it would hold.
func (t *Turn) admit(st *Start, size int64) error {
	s := t.l.S
	if err := t.e.checkSessionStorage(s, size); err != nil {
		return err
	}
	if n := len(MergeMetadata(s.Metadata, st.Metadata)); n > MaxMetadataKeys {
		return invalid("metadata", "the session would hold %d keys; at most %d", n, MaxMetadataKeys)
	}
	return nil
}

// readHistory takes, under l's mutex, what of the session's history the model will see: the
// entries after the compaction summary, and the summary.
func (t *Turn) readHistory() {
	s := t.l.S
	t.base = min(s.State.SummaryUpTo, len(s.Messages))
	t.summary = s.State.Summary
	t.history = make([]models.Message, 0, len(s.Messages)-t.base)
	for i := t.base; i < len(s.Messages); i++ {
		t.history = append(t.history, s.Messages[i].Message)
	}
}

// MergeMetadata is have with add's keys set (latest value per key); have is not changed.
func MergeMetadata(have, add map[string]string) map[string]string {
	if len(add) == 0 {
		return have
	}
	merged := maps.Clone(have)
	if merged == nil {
		merged = make(map[string]string, len(add))
	}
	maps.Copy(merged, add)
	return merged
}

// setup applies an admitted message to the turn's session: metadata, context, status, the
// turn's prompt and model, and the user's entry in the history (its parts kept by reference).
func (t *Turn) setup(st *Start, kept []models.Part) {
	e, l := t.e, t.l
	l.Lock()
	defer l.Unlock()
	s := l.S
	s.Metadata = MergeMetadata(s.Metadata, st.Metadata)
	if st.Context != nil {
		s.Context = maps.Clone(st.Context)
	}
	now := e.cfg.Now()
	t.fresh = !l.Persisted && len(s.Messages) == 0
	if s.Title == "" {
		s.Title = titleOf(st.Text)
	}
	s.Status = sessions.StatusRunning
	s.UpdatedAt = now
	l.LastUsed = now
	l.Turn = t.queue

	t.context = maps.Clone(s.Context)
	t.meta = maps.Clone(s.Metadata)
	t.owner, t.scope = s.Owner, s.ScopeID
	t.choice = agent.ModelRef{Provider: s.Model.Provider, Model: s.Model.Model, Effort: s.Model.Effort}
	t.prof = e.cfg.Profiles.ForSession(s)
	t.system = t.prof.System(s.Context)
	var fallback bool
	t.ref, fallback = e.ModelRef(s)
	if st.Provider != nil {
		t.provider, t.ref = st.Provider, agent.ModelRef{Provider: "scripted", Model: "tool-call"}
	} else {
		t.provider, t.modelErr = e.cfg.Models(t.ref)
	}
	if e.records {
		t.run = t.startRun(st, now)
		s.State.Run = t.run
	}
	if t.fresh {
		if fallback {
			t.warnings = append(t.warnings, "No model is configured (svc.json models.main or SVC_DEFAULT_MODEL), so this session uses the echo model, which repeats your message.")
		}
		if t.prof.Omitted != "" {
			t.warnings = append(t.warnings, t.prof.Omitted)
		}
	}
	t.warnings = append(t.warnings, st.Warnings...)

	t.budget, t.used = s.MaxSessionTokens, s.Usage.Total()
	t.input = []models.Message{{Role: models.RoleUser, Content: st.Text, Parts: st.Parts}}
	entry := models.Message{Role: models.RoleUser, Content: st.Text, Parts: kept} // content by reference
	s.Messages = append(s.Messages, sessions.Entry{Message: entry, At: now})
	s.StoredBytes += EntrySize(&entry)
}

// Abandon undoes Open for a turn that will not run, and releases its Lock.
func (t *Turn) Abandon() {
	t.l.Lock()
	if t.l.Turn == t.queue {
		t.l.Turn = nil
	}
	t.l.S.Status = sessions.StatusIdle
	t.l.S.State.Run = nil
	t.l.Unlock()
	t.queue.Close()
	t.lock.Release()
}

// Run streams the turn to sink, stores its result and releases the Lock. A sink that fails
// (a client that left) should cancel ctx: the turn ends with user_abort and its partial answer
// is stored. The done frame is the last frame.
//
// Its frame is small: a turn waiting on its model is what an open stream costs, and its
// goroutine keeps an 8 KiB stack in place of 16 only while the frames on it stay well under
// that (scripts/stackgrow.sh). So the work before and after the loop is in functions of their
// own, and the loop's parameters are on the heap.
func (t *Turn) Run(ctx context.Context, sink loop.Sink) loop.Result {
	r := t.begin(ctx, sink)
	var res loop.Result
	if t.modelErr != nil {
		res = t.unavailable(r)
	} else {
		res = loop.Run(r.ctx, t.params(r))
	}
	t.end(r, &res)
	return res
}

// unavailable is the result of a turn whose model is not available.
func (t *Turn) unavailable(r *running) loop.Result {
	t.e.cfg.Logger.WarnContext(r.ctx, "model unavailable", "provider", t.ref.Provider, "model", t.ref.Model, "err", t.modelErr)
	_ = r.sink.Emit(&sse.Frame{Type: sse.TypeError, Message: "model " + t.ref.Provider + "/" + t.ref.Model + " is not available: " + t.modelErr.Error()})
	return loop.Result{Reason: loop.ReasonError, Err: t.modelErr, Messages: t.input}
}

// running is a turn's state between begin and end.
type running struct {
	ctx    context.Context
	cancel context.CancelCauseFunc // of ctx: the turn's own (a lock that can be lost), t.Cancel, or nil
	own    bool                    // cancel is the turn's own, to call when it ends
	sink   loop.Sink
	timing *timingSink // nil without an Observer
	span   turnSpan
}

// begin sends the turn's first frames and starts its span.
func (t *Turn) begin(ctx context.Context, sink loop.Sink) *running {
	r := &running{}
	if obs := t.e.cfg.Observer; obs != nil {
		obs.TurnStarted()
		r.timing = &timingSink{next: sink, start: time.Now()}
		sink = r.timing
	}
	sink = &checkpointSink{next: sink, t: t, ctx: ctx, start: time.Now()}
	r.sink = sink
	_ = sink.Emit(&sse.Frame{Type: sse.TypeInit, SessionID: t.l.ID}) // a gone client cancels ctx through the sink
	if t.redacted != "" {
		_ = sink.Emit(&sse.Frame{Type: sse.TypeInputRedacted, Text: t.redacted})
	}
	for _, w := range t.warnings {
		_ = sink.Emit(&sse.Frame{Type: sse.TypeWarning, Message: w})
	}
	if t.fresh && t.prof.Skill != nil {
		_ = sink.Emit(&sse.Frame{Type: sse.TypeSkillActivated, SkillName: t.prof.Skill.Name})
	}
	ctx, r.span = t.startSpan(ctx)
	r.cancel = t.Cancel
	if t.lock.Lost != nil {
		r.own = true
		// A lost lock means another runtime may take the session: the turn stops at once.
		ctx, r.cancel = context.WithCancelCause(ctx)
		go func(ctx context.Context, cancel context.CancelCauseFunc) {
			select {
			case <-t.lock.Lost:
				cancel(ErrLockLost)
			case <-ctx.Done():
			}
		}(ctx, r.cancel)
	}
	r.ctx = ctx
	return r
}

// params are the loop's parameters for the turn.
func (t *Turn) params(r *running) *loop.Params {
	return &loop.Params{
		Provider: t.provider, ProviderName: t.ref.Provider, Model: t.ref.Model, Effort: t.ref.Effort,
		ContextWindow: t.e.cfg.ContextWindow, System: t.system,
		History: t.history, Summary: t.summary, Input: t.input, Tools: t.prof.Tools.Set,
		MaxTurns: t.e.cfg.MaxTurns, Budget: t.budget, Used: t.used, Queue: t.queue, Sink: r.sink,
		Session: tools.Session{ID: t.l.ID, Owner: t.owner, ScopeID: t.scope, Context: t.context, Calls: new(atomic.Int64), Attachments: t.files, Model: t.choice, Eval: t.eval}, Approvals: t.approvals(),
		Tracer:  t.e.cfg.Tracer,
		OnSkill: t.onSkill, OnKnowledge: t.onKnowledge, Handoff: t.handoff, Logger: t.e.cfg.Logger,
		Cancel: r.cancel,
	}
}

// end stores the turn's result, ends its span and sends the done frame.
func (t *Turn) end(r *running, res *loop.Result) {
	ctx := r.ctx
	if r.own {
		defer r.cancel(nil)
	}
	if errors.Is(context.Cause(ctx), ErrLockLost) {
		t.e.cfg.Logger.ErrorContext(ctx, "turn stopped: its session lock was lost", "session", t.l.ID)
		_ = r.sink.Emit(&sse.Frame{Type: sse.TypeError, Message: "the session's turn lock was lost (another runtime may run a turn on it now): the turn stopped and its answer was not stored"})
		res.Reason = loop.ReasonError
	}
	t.finish(ctx, *res, sampledTraceID(r.span.Span))
	if r.timing != nil {
		t.e.cfg.Observer.TurnDone(t.report(*res, r.timing.first))
	}
	traceID := t.endSpan(r.span, *res)
	_ = r.sink.Emit(&sse.Frame{Type: sse.TypeDone, Reason: string(res.Reason), Turns: res.Turns, TraceID: traceID, Usage: &sse.Usage{
		InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens,
		CachedTokens: res.Usage.CachedTokens, TotalTokens: res.Usage.Total(),
	}})
}

// handoff switches the session's root agent to `to` (the handoff built-in): the session
// records it, so later turns run as that agent too, and the rest of this run gets its prompt
// and tools.
func (t *Turn) handoff(to string) (loop.Switch, error) {
	name, p, err := t.e.cfg.Profiles.Resolve(to, "")
	if err != nil {
		return loop.Switch{}, err
	}
	t.l.Lock()
	s := t.l.S
	from := s.Agent
	s.Agent, s.Skill = name, ""
	system := p.System(s.Context)
	t.l.Unlock()
	var removed []string
	for _, n := range t.prof.Tools.Set.Names() {
		if _, ok := p.Tools.Set.Get(n); !ok {
			removed = append(removed, n)
		}
	}
	t.prof = p
	return loop.Switch{System: system, Tools: p.Tools.Set, Frame: &sse.Frame{Type: sse.TypeAgentHandoff, From: from, To: name, RemovedTools: removed}}, nil
}

func (t *Turn) onSkill(name string) {
	t.l.Lock()
	if !slices.Contains(t.l.S.State.ActiveSkills, name) {
		t.l.S.State.ActiveSkills = append(t.l.S.State.ActiveSkills, name)
	}
	t.l.Unlock()
}

func (t *Turn) onKnowledge(name string) {
	t.l.Lock()
	if !slices.Contains(t.l.S.State.LoadedKnowledge, name) {
		t.l.S.State.LoadedKnowledge = append(t.l.S.State.LoadedKnowledge, name)
	}
	t.l.Unlock()
}

// finish records the run on the session, stores it with the run's record (even when the
// client left) and releases the turn lock.
func (t *Turn) finish(ctx context.Context, res loop.Result, traceID string) {
	defer t.lock.Release()
	e, l := t.e, t.l
	if errors.Is(context.Cause(ctx), ErrLockLost) {
		// The session may be another runtime's now: store nothing over it, and let the next
		// request read it from the store again.
		l.Lock()
		if l.Turn == t.queue {
			l.Turn = nil
		}
		l.Unlock()
		e.cfg.Cache.Drop(l)
		return
	}
	now := e.cfg.Now()
	l.Lock()
	s := l.S
	added := res.Messages[min(len(t.input), len(res.Messages)):]
	for i, m := range added {
		s.Messages = append(s.Messages, sessions.Entry{Message: m, At: now, Interrupted: res.Interrupted && i == len(added)-1})
		s.StoredBytes += EntrySize(&m)
	}
	s.Usage.InputTokens += res.Usage.InputTokens
	s.Usage.OutputTokens += res.Usage.OutputTokens
	s.Usage.CachedTokens += res.Usage.CachedTokens
	if res.Compacted {
		s.State.Summary = res.Summary
		s.State.SummaryUpTo = t.base + res.Covered
	}
	s.Status = sessions.StatusIdle
	s.State.Partial = ""
	s.State.Run = nil
	s.UpdatedAt = now
	l.LastUsed = now
	if l.Turn == t.queue {
		l.Turn = nil
	}
	l.Unlock()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
	defer cancel()
	if err := e.cfg.Cache.PersistRun(pctx, l, t.endRun(res, now, traceID)); err != nil {
		e.cfg.Logger.ErrorContext(ctx, "store turn result", "session", l.ID, "err", err)
		return
	}
	e.cfg.Cache.Done(l)
}

// titleOf is the default title of a session: the first line of its first message.
func titleOf(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.TrimSpace(line)
	if utf8.RuneCountInString(line) <= 80 {
		return line
	}
	r := []rune(line)
	return string(r[:79]) + "…"
}

// approvals is the turn's side of the approvals of its calls, or nil when the Engine has none.
func (t *Turn) approvals() loop.Approvals {
	if t.e.cfg.Approvals == nil {
		return nil
	}
	return &turnApprovals{t: t, pending: map[string]approvals.Approval{}}
}

// turnApprovals implements loop.Approvals over the Engine's Hub.
type turnApprovals struct {
	t       *Turn
	mu      sync.Mutex
	pending map[string]approvals.Approval
}

// Request implements loop.Approvals.
func (a *turnApprovals) Request(ctx context.Context, toolName, toolID string) (string, error) {
	cfg := a.t.e.cfg
	ap, err := cfg.Approvals.Request(ctx, approvals.Approval{
		ID: auth.NewID("apr_"), AgentID: cfg.AgentID, SessionID: a.t.l.ID, ToolName: toolName, ToolID: toolID,
	}, cfg.ApprovalTimeout)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.pending[ap.ID] = ap
	a.mu.Unlock()
	return ap.ID, nil
}

// Wait implements loop.Approvals.
func (a *turnApprovals) Wait(ctx context.Context, id string) (approved, timedOut bool, err error) {
	a.mu.Lock()
	ap, ok := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if !ok {
		return false, false, fmt.Errorf("approval %s was not requested by this turn", id)
	}
	got, err := a.t.e.cfg.Approvals.Wait(ctx, ap)
	if err != nil {
		return false, false, err
	}
	switch got.Status {
	case approvals.Approved:
		return true, false, nil
	case approvals.Expired:
		return false, true, nil
	case approvals.Cancelled:
		return false, false, context.Cause(ctx)
	}
	return false, false, nil
}
