package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"svc/agent"
	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
	"svc/runner/sse"
)

// persistTimeout bounds the save of a turn's result, which outlives a client that left.
const persistTimeout = 30 * time.Second

// errLockLost is the cancellation cause of a turn whose session lock was lost.
var errLockLost = errors.New("runtime: the session's turn lock was lost")

// turn is one chat turn between beginTurn and its done frame.
type turn struct {
	rt       *Runtime
	l        *live.Session
	id       string
	fresh    bool // the session's first turn: warnings and skill activation are announced
	prof     *profile
	ref      agent.ModelRef
	provider models.Provider
	modelErr error
	warnings []string
	release  func()
	lost     <-chan struct{} // closed when the turn lock is lost (nil: it cannot be)
	queue    *loop.Queue
	input    []models.Message
	history  []models.Message
	summary  string
	base     int // State.SummaryUpTo when the turn began
	system   string
	budget   int
	used     int
}

// beginTurn validates a chat request, resolves its session (spec §4.6), takes the turn lock
// and stores the user's message. Every error is returned before anything is streamed.
func (rt *Runtime) beginTurn(ctx context.Context, c *caller, req *chatRequest) (*turn, error) {
	// 1. Validate.
	in, err := req.validate()
	if err != nil {
		return nil, err
	}
	if err := rt.requireScope(c, req.ScopeID); err != nil {
		return nil, err
	}
	size := entrySize(&models.Message{Content: in.text, Parts: in.parts})
	if err := rt.checkAgentStorage(ctx, size); err != nil {
		return nil, err
	}
	// 2, 3. Resolve the session and take its turn lock.
	l, lk, err := rt.lockSession(ctx, c, req)
	if err != nil {
		return nil, err
	}
	t := &turn{rt: rt, l: l, id: l.ID, release: lk.release, lost: lk.lost, queue: loop.NewQueue()}
	// Every check that can refuse the message comes before its attachments are stored, so a
	// refused message stores nothing; then the content goes to the session's blobs, apart from
	// its history rows, and setup cannot fail.
	// The history the model will see is taken, and its attachments read back, before that too.
	l.Lock()
	err = t.admit(req, size)
	if err == nil {
		t.readHistory()
	}
	l.Unlock()
	if err == nil {
		t.history, err = rt.loadParts(ctx, t.id, t.history)
	}
	if err == nil {
		in.kept, err = rt.storeParts(ctx, t.id, in.parts)
	}
	if err != nil {
		t.abandon()
		return nil, err
	}
	t.setup(req, in)
	// An eviction between lookup and lock must not orphan the running turn: its queue is
	// found through the cache.
	rt.cache.Insert(l)
	// 4. Store the request before running it, so that history shows it even if the process dies.
	if err := rt.cache.Persist(ctx, l); err != nil {
		t.abandon()
		return nil, fmt.Errorf("store turn start: %w", err)
	}
	return t, nil
}

// lockSession resolves the session of a chat request (spec 4.6) and takes its turn lock. A
// requested id is locked before its session is read, so that over a shared store no other
// runtime's turn falls between the read and the lock; a copy that was live here already (another
// request of this runtime holds it) is refreshed under the lock. An unknown id creates a session
// with that id; a session the caller may not see is never resumed: the caller gets a fresh
// session instead (rules 5, 6).
func (rt *Runtime) lockSession(ctx context.Context, c *caller, req *chatRequest) (*live.Session, turnLock, error) {
	if id := req.SessionID; id != "" {
		lk, err := rt.tryLock(ctx, id)
		if err != nil {
			return nil, turnLock{}, err
		}
		l, err := rt.resume(ctx, c, req, id)
		switch {
		case err != nil:
			lk.release()
			return nil, turnLock{}, err
		case l != nil:
			return l, lk, nil
		}
		lk.release() // not the caller's: a fresh session instead
	}
	l, err := rt.create(c, req, newSessionID())
	if err != nil {
		return nil, turnLock{}, err
	}
	if l == nil {
		return nil, turnLock{}, errors.New("new session id already taken") // 80 random bits: not in practice
	}
	lk, err := rt.tryLock(ctx, l.ID)
	if err != nil {
		rt.cache.Drop(l)
		return nil, turnLock{}, err
	}
	return l, lk, nil
}

// turnLock is a chat's hold on its session: release frees it; lost, when not nil, is closed if
// the lock is lost before that (a shared lock that could not be renewed).
type turnLock struct {
	release func()
	lost    <-chan struct{}
}

// tryLock takes the turn lock of session id, watching for its loss when the Locker can.
func (rt *Runtime) tryLock(ctx context.Context, id string) (turnLock, error) {
	var lk turnLock
	var err error
	if w, ok := rt.locker.(sessions.Watcher); ok {
		lk.release, lk.lost, err = w.TryLockWatch(ctx, id)
	} else {
		lk.release, err = rt.locker.TryLock(ctx, id)
	}
	if errors.Is(err, sessions.ErrLocked) {
		return turnLock{}, apiErr(CodeTurnInProgress)
	}
	if err != nil {
		return turnLock{}, fmt.Errorf("lock session: %w", err)
	}
	return lk, nil
}

// resume returns the session id for a turn whose lock the caller holds: the stored or live
// session, or a new one of that id when none exists; nil when the caller may not see it or it
// belongs to another agent.
func (rt *Runtime) resume(ctx context.Context, c *caller, req *chatRequest, id string) (*live.Session, error) {
	l, loaded, err := rt.cache.Get(ctx, id)
	if err == nil && rt.opts.SharedStore && !loaded {
		err = rt.cache.Refresh(ctx, l)
		if err == nil && !isPersisted(l) {
			// Prepared here (POST /sessions) or left by a first turn that failed to store it:
			// another runtime may have stored a session of this id since. The stored one wins.
			prepared := l
			rt.cache.Drop(prepared)
			l, _, err = rt.cache.Get(ctx, id)
			if errors.Is(err, sessions.ErrNotFound) {
				l, err = rt.cache.Insert(prepared), nil
			}
		}
	}
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		return rt.create(c, req, id)
	case errors.Is(err, live.ErrOtherAgent):
		return nil, nil
	case err != nil:
		return nil, err
	case !seenBy(l, c):
		return nil, nil
	}
	return l, nil
}

// create makes a live session of id for req (not stored before its first turn). When a live
// session of that id appeared meanwhile it is returned instead if c may see it, else nil.
func (rt *Runtime) create(c *caller, req *chatRequest, id string) (*live.Session, error) {
	agentName, _, err := rt.resolveProfile(req.Agent, req.Skill)
	if err != nil {
		return nil, err
	}
	s := rt.newSession(id, c, sessionFields{
		scopeID: req.ScopeID, agent: agentName, skill: req.Skill, deployID: req.DeployID,
		model: req.Model, maxTokens: req.MaxSessionTokens,
	})
	mine := rt.cache.NewSession(s, false)
	l := rt.cache.Insert(mine)
	if l != mine && !seenBy(l, c) {
		return nil, nil
	}
	return l, nil
}

// setup applies the request to the session under its lock and prepares the run.
// admit checks, under l.mu, what could refuse a message of size bytes on the turn's session:
// its storage bound and the metadata keys it would hold.
func (t *turn) admit(req *chatRequest, size int64) error {
	s := t.l.S
	if err := t.rt.checkSessionStorage(s, size); err != nil {
		return err
	}
	if n := len(mergeMetadata(s.Metadata, req.Metadata)); n > MaxMetadataKeys {
		return invalid("metadata", "the session would hold %d keys; at most %d", n, MaxMetadataKeys)
	}
	return nil
}

// readHistory takes, under l's lock, what of the session's history the model will see: the
// entries after the compaction summary, and the summary.
func (t *turn) readHistory() {
	s := t.l.S
	t.base = min(s.State.SummaryUpTo, len(s.Messages))
	t.summary = s.State.Summary
	t.history = make([]models.Message, 0, len(s.Messages)-t.base)
	for i := t.base; i < len(s.Messages); i++ {
		t.history = append(t.history, s.Messages[i].Message)
	}
}

// mergeMetadata is the session's metadata with the request's keys set (latest value per key).
func mergeMetadata(have, add map[string]string) map[string]string {
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
// turn's prompt and model, and the user's entry in the history.
func (t *turn) setup(req *chatRequest, in *input) {
	rt, l := t.rt, t.l
	l.Lock()
	defer l.Unlock()
	s := l.S
	s.Metadata = mergeMetadata(s.Metadata, req.Metadata)
	if req.Context != nil {
		s.Context = maps.Clone(req.Context)
	}
	now := rt.now()
	t.fresh = !l.Persisted && len(s.Messages) == 0
	if s.Title == "" {
		s.Title = titleOf(in.text)
	}
	s.Status = sessions.StatusRunning
	s.UpdatedAt = now
	l.LastUsed = now
	l.Turn = t.queue

	t.prof = rt.sessionProfile(s)
	if t.prof.templated {
		t.system = loop.Fill(t.prof.prompt, s.Context)
	} else {
		t.system = t.prof.prompt
	}
	var fallback bool
	t.ref, fallback = rt.modelRef(s)
	t.provider, t.modelErr = rt.models(t.ref)
	if t.fresh {
		if fallback {
			t.warnings = append(t.warnings, "No model is configured (svc.json models.main or SVC_DEFAULT_MODEL), so this session uses the echo model, which repeats your message.")
		}
		if t.prof.omitted != "" {
			t.warnings = append(t.warnings, t.prof.omitted)
		}
	}
	t.warnings = append(t.warnings, in.warnings...)

	t.budget, t.used = s.MaxSessionTokens, s.Usage.Total()
	msg := models.Message{Role: models.RoleUser, Content: in.text, Parts: in.parts}
	t.input = []models.Message{msg}
	kept := models.Message{Role: models.RoleUser, Content: in.text, Parts: in.kept} // content by reference
	s.Messages = append(s.Messages, sessions.Entry{Message: kept, At: now})
	s.StoredBytes += entrySize(&kept)
}

// abandon undoes setup for a turn that never ran.
func (t *turn) abandon() {
	t.l.Lock()
	if t.l.Turn == t.queue {
		t.l.Turn = nil
	}
	t.l.S.Status = sessions.StatusIdle
	t.l.Unlock()
	t.queue.Close()
	t.release()
}

// sessionProfile is the profile of a stored session; a session whose agent or skill no longer
// exists (after a deploy) falls back to the default chat of its agent.
func (rt *Runtime) sessionProfile(s *sessions.Session) *profile {
	if p := rt.profiles[profileKey{s.Agent, s.Skill}]; p != nil {
		return p
	}
	if p := rt.profiles[profileKey{s.Agent, ""}]; p != nil {
		return p
	}
	name, p, err := rt.resolveProfile("", "")
	if err != nil || p == nil {
		return rt.profiles[profileKey{name, ""}]
	}
	return p
}

// modelRef picks the session's model: the request's choice, else svc.json models.main, else
// the runtime default, else echo (fallback true).
func (rt *Runtime) modelRef(s *sessions.Session) (agent.ModelRef, bool) {
	main, hasMain := rt.ag.MainModel()
	if !s.Model.IsZero() {
		ref := agent.ModelRef{Provider: s.Model.Provider, Model: s.Model.Model, Effort: s.Model.Effort}
		if hasMain && main.Provider == ref.Provider { // same provider: its endpoint and key apply
			ref.BaseURL, ref.APIKey = main.BaseURL, main.APIKey
		}
		return ref, false
	}
	if hasMain {
		return main, false
	}
	if rt.opts.DefaultModel.Provider != "" {
		return rt.opts.DefaultModel, false
	}
	return agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}, true
}

// run streams the turn to sink and stores its result; sink errors (a gone client) cancel it.
func (t *turn) run(ctx context.Context, sink loop.Sink) loop.Result {
	_ = sink.Emit(&sse.Frame{Type: sse.TypeInit, SessionID: t.id}) // a gone client cancels ctx through the sink
	for _, w := range t.warnings {
		_ = sink.Emit(&sse.Frame{Type: sse.TypeWarning, Message: w})
	}
	if t.fresh && t.prof.skill != nil {
		_ = sink.Emit(&sse.Frame{Type: sse.TypeSkillActivated, SkillName: t.prof.skill.Name})
	}
	if t.lost != nil {
		// A lost lock means another runtime may take the session: the turn stops at once.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			select {
			case <-t.lost:
				cancel(errLockLost)
			case <-ctx.Done():
			}
		}()
	}
	var res loop.Result
	if t.modelErr != nil {
		t.rt.log.WarnContext(ctx, "model unavailable", "provider", t.ref.Provider, "model", t.ref.Model, "err", t.modelErr)
		_ = sink.Emit(&sse.Frame{Type: sse.TypeError, Message: "model " + t.ref.Provider + "/" + t.ref.Model + " is not available: " + t.modelErr.Error()})
		res = loop.Result{Reason: loop.ReasonError, Err: t.modelErr, Messages: t.input}
	} else {
		res = loop.Run(ctx, loop.Params{
			Provider: t.provider, ProviderName: t.ref.Provider, Model: t.ref.Model, Effort: t.ref.Effort,
			ContextWindow: t.rt.opts.ContextWindow, System: t.system,
			History: t.history, Summary: t.summary, Input: t.input, Tools: t.prof.sel.Set,
			MaxTurns: t.rt.opts.MaxTurns, Budget: t.budget, Used: t.used, Queue: t.queue, Sink: sink,
			OnSkill: t.onSkill, OnKnowledge: t.onKnowledge, Logger: t.rt.log,
		})
	}
	if errors.Is(context.Cause(ctx), errLockLost) {
		t.rt.log.ErrorContext(ctx, "turn stopped: its session lock was lost", "session", t.id)
		_ = sink.Emit(&sse.Frame{Type: sse.TypeError, Message: "the session's turn lock was lost (another runtime may run a turn on it now): the turn stopped and its answer was not stored"})
		res.Reason = loop.ReasonError
	}
	t.finish(ctx, res)
	total := res.Usage.Total()
	_ = sink.Emit(&sse.Frame{Type: sse.TypeDone, Reason: string(res.Reason), Turns: res.Turns, Usage: &sse.Usage{
		InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens,
		CachedTokens: res.Usage.CachedTokens, TotalTokens: total,
	}})
	return res
}

func (t *turn) onSkill(name string) {
	t.l.Lock()
	if !slices.Contains(t.l.S.State.ActiveSkills, name) {
		t.l.S.State.ActiveSkills = append(t.l.S.State.ActiveSkills, name)
	}
	t.l.Unlock()
}

func (t *turn) onKnowledge(name string) {
	t.l.Lock()
	if !slices.Contains(t.l.S.State.LoadedKnowledge, name) {
		t.l.S.State.LoadedKnowledge = append(t.l.S.State.LoadedKnowledge, name)
	}
	t.l.Unlock()
}

// finish records the run on the session, stores it (even when the client left) and releases
// the turn lock.
func (t *turn) finish(ctx context.Context, res loop.Result) {
	defer t.release()
	if errors.Is(context.Cause(ctx), errLockLost) {
		// The session may be another runtime's now: store nothing over it, and let the next
		// request read it from the store again.
		t.l.Lock()
		if t.l.Turn == t.queue {
			t.l.Turn = nil
		}
		t.l.Unlock()
		t.rt.cache.Drop(t.l)
		return
	}
	rt, l := t.rt, t.l
	now := rt.now()
	l.Lock()
	s := l.S
	added := res.Messages[min(len(t.input), len(res.Messages)):]
	for i, m := range added {
		s.Messages = append(s.Messages, sessions.Entry{Message: m, At: now, Interrupted: res.Interrupted && i == len(added)-1})
		s.StoredBytes += entrySize(&m)
	}
	s.Usage.InputTokens += res.Usage.InputTokens
	s.Usage.OutputTokens += res.Usage.OutputTokens
	s.Usage.CachedTokens += res.Usage.CachedTokens
	if res.Compacted {
		s.State.Summary = res.Summary
		s.State.SummaryUpTo = t.base + res.Covered
	}
	s.Status = sessions.StatusIdle
	s.UpdatedAt = now
	l.LastUsed = now
	if l.Turn == t.queue {
		l.Turn = nil
	}
	l.Unlock()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
	defer cancel()
	if err := rt.cache.Persist(pctx, l); err != nil {
		rt.log.ErrorContext(ctx, "store turn result", "session", t.id, "err", err)
		return
	}
	rt.cache.Done(l)
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

// sseSink writes frames to an SSE response; a failed write cancels the turn.
type sseSink struct {
	w      *sse.Writer
	cancel context.CancelCauseFunc
}

// Emit implements loop.Sink.
func (s *sseSink) Emit(f *sse.Frame) error {
	if err := s.w.Write(f); err != nil {
		s.cancel(loop.ErrUserAbort)
		return err
	}
	return nil
}

// chatStream serves POST /chat and /chat/stream: the turn as SSE frames.
func (rt *Runtime) chatStream(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req chatRequest
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	t, err := rt.beginTurn(r.Context(), c, &req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	sw := sse.NewWriter(w)
	sw.Now = rt.now
	sw.Coalesce()
	// Detach, not Close: the server flushes the last frames with the end of the response.
	defer sw.Detach() //nolint:errcheck // a client that left is the turn's user_abort, already handled
	if err := sw.Start(); err != nil {
		cancel(loop.ErrUserAbort)
	}
	t.run(ctx, &sseSink{w: sw, cancel: cancel})
	return nil
}

// syncToolCall is one tool call of a /chat/sync answer.
type syncToolCall struct {
	ToolID     string `json:"tool_id"`
	ToolName   string `json:"tool_name"`
	Parameters any    `json:"parameters"`
	Status     string `json:"status,omitempty"`
	Result     any    `json:"result,omitempty"`
	Content    string `json:"content,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

type syncDone struct {
	Reason string    `json:"reason"`
	Turns  int       `json:"turns"`
	Usage  sse.Usage `json:"usage"`
}

// syncAnswer is the body of /chat/sync (CONTRACT §6), with warnings and errors added.
type syncAnswer struct {
	SessionID string         `json:"session_id"`
	Text      string         `json:"text"`
	ToolCalls []syncToolCall `json:"tool_calls"`
	Warnings  []string       `json:"warnings,omitempty"`
	Errors    []string       `json:"errors,omitempty"`
	Skills    []string       `json:"skills_activated,omitempty"`
	Done      syncDone       `json:"done"`
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
		s.a.ToolCalls = append(s.a.ToolCalls, syncToolCall{ToolID: f.ToolID, ToolName: f.ToolName, Parameters: rawOrNil(f.Parameters)})
	case sse.TypeToolCallResult:
		for i := range s.a.ToolCalls {
			if tc := &s.a.ToolCalls[i]; tc.ToolID == f.ToolID {
				tc.Status, tc.Result, tc.Content, tc.Error, tc.DurationMS = f.Status, rawOrNil(f.Result), f.Content, f.Error, f.DurationMS
			}
		}
	case sse.TypeWarning:
		s.a.Warnings = append(s.a.Warnings, f.Message)
	case sse.TypeError:
		s.a.Errors = append(s.a.Errors, f.Message)
	case sse.TypeSkillActivated:
		s.a.Skills = append(s.a.Skills, f.SkillName)
	case sse.TypeDone:
		s.a.Done = syncDone{Reason: f.Reason, Turns: f.Turns}
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
func (rt *Runtime) chatSync(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req chatRequest
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	t, err := rt.beginTurn(r.Context(), c, &req)
	if err != nil {
		return err
	}
	sink := &syncSink{}
	t.run(r.Context(), sink)
	sink.a.Text = sink.text.String()
	if sink.a.ToolCalls == nil {
		sink.a.ToolCalls = []syncToolCall{}
	}
	writeJSON(w, http.StatusOK, sink.a)
	return nil
}

// requireScope applies svc.json's scope.requireScope on local routes (svc dev, a runtime with no
// runtime-token verifier): spec 5.5. Hosted chat does not enforce it; the application backend
// authorizes scopes there.
func (rt *Runtime) requireScope(c *caller, requested string) error {
	sc := rt.opts.Agent.Config.Scope
	if rt.opts.Verifier != nil || sc == nil || !sc.RequireScope || c.scopeFor(requested) != "" {
		return nil
	}
	return invalid("scope_id", "is required: svc.json sets scope.requireScope")
}
