package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"svc/runner/models"
	"svc/runner/sse"
	"svc/runner/tools"
)

// DefaultMaxTurns is the model-turn limit of a run when Params.MaxTurns is 0 (spec §8).
const DefaultMaxTurns = 50

// Reason is why a run ended: the done frame's reason (spec §6.3).
type Reason string

// Done reasons.
const (
	ReasonModelStop      Reason = "model_stop"
	ReasonMaxTurns       Reason = "max_turns"
	ReasonUserAbort      Reason = "user_abort"
	ReasonError          Reason = "error"
	ReasonBudgetExceeded Reason = "budget_exceeded"
)

// ErrUserAbort is the cancellation cause of a run whose client went away.
var ErrUserAbort = errors.New("loop: user abort")

// Sink receives the frames of a run, one call at a time, in order. The frame is only valid
// during the call. An error means the client is gone: the run is cancelled (user_abort).
type Sink interface {
	Emit(f *sse.Frame) error
}

// Params is one run. Zero values are documented defaults.
type Params struct {
	Provider models.Provider
	// ProviderName and Model select the model; ProviderName also picks the context window.
	ProviderName string
	Model        string
	Effort       string
	// ContextWindow is the model's window in tokens; 0 means models.ContextWindow.
	ContextWindow int
	// System is the complete system prompt.
	System string
	// History is the conversation before this run as the model sees it: the stored messages
	// after the part Summary covers. Messages are never changed.
	History []models.Message
	// Summary is the compaction summary of what came before History, or "".
	Summary string
	// Input is this run's new user message(s).
	Input []models.Message
	// Tools are offered to the model; nil offers none.
	Tools *tools.Set
	// MaxTurns bounds the model calls of the run; 0 means DefaultMaxTurns.
	MaxTurns int
	// Budget is the session's token budget (max_session_tokens), 0 for none; Used is what the
	// session spent before this run.
	Budget int
	Used   int
	// Subagent marks a specialist's run: it makes no final summary call.
	Subagent bool
	// Approvals asks the user to approve the calls of tools.Approver tools that need it; nil
	// refuses such calls.
	Approvals Approvals
	// Tracer, when set, records a span per model call and per tool call (children of the
	// span in ctx); nil records nothing.
	Tracer trace.Tracer
	// Session is handed to every tool call.
	Session tools.Session
	// Queue brings messages sent during the run; nil means none can be sent.
	Queue *Queue
	Sink  Sink
	// OnSkill and OnKnowledge are told when a tool activates a skill or reads a document.
	// They may be called from several goroutines at once.
	OnSkill     func(name string)
	OnKnowledge func(name string)
	// Handoff switches the session to agent to after a handoff tool call: it returns the
	// system prompt and tools of the next model calls and the agent_handoff frame to stream.
	// nil refuses handoffs (the call's result says so to the model).
	Handoff func(to string) (Switch, error)
	Logger  *slog.Logger
	// Cancel, when set, cancels Run's ctx, which the caller cancels once Run returns: the run
	// cancels through it (a sink that fails) instead of through a context of its own, which
	// would cost each open stream a context, its channel and its parent's map of children.
	Cancel context.CancelCauseFunc
}

// Approvals records and awaits the user's approval of calls (CONTRACT §7, Approvals).
type Approvals interface {
	// Request records that a call needs approval and returns its correlation id.
	Request(ctx context.Context, toolName, toolID string) (id string, err error)
	// Wait blocks until approval id is decided: approved, or denied (timedOut when no answer
	// came in time). It returns an error when ctx ends first; the call must not run then.
	Wait(ctx context.Context, id string) (approved, timedOut bool, err error)
}

// Switch is what a handoff changes for the rest of the run.
type Switch struct {
	System string
	Tools  *tools.Set
	Frame  *sse.Frame // agent_handoff
}

// Result is the outcome of a run.
type Result struct {
	Reason Reason
	// Turns counts the model calls of the loop (the final summary and compaction calls excluded).
	Turns int
	// Usage counts every model call of the run, summary and compaction included.
	Usage models.Usage
	// Messages are the run's new messages in order: Input, queued messages, assistant
	// messages and tool results. They extend History one to one.
	Messages []models.Message
	// Interrupted reports a cancelled run: its last assistant message holds what the model
	// produced until then (without tool calls that never ran), or is an empty assistant message.
	Interrupted bool
	// Err is the error behind ReasonError.
	Err error
	// Compacted reports that Summary now replaces the first Covered messages of
	// History+Messages in what the model sees.
	Compacted bool
	Summary   string
	Covered   int
}

// Limits of context management (spec §8).
const (
	clearAbove        = 15   // tool results before clearing starts
	clearKeep         = 5    // latest tool results kept whole
	compactKeepUsers  = 6    // latest user turns kept verbatim
	compactMaxTokens  = 4000 // cap of a summary
	compactMaxFails   = 3    // consecutive failures that stop compaction for the run
	compactPercent    = 90   // trigger: estimated context above this share of the window
	charsPerToken     = 4    // estimate
	summaryCharsLimit = compactMaxTokens * charsPerToken
)

type run struct {
	p       *Params
	ctx     context.Context
	cancel  context.CancelCauseFunc
	log     *slog.Logger
	all     []models.Message // History, then the run's messages
	nHist   int
	start   int // the model sees all[start:] (after the summary)
	summary string
	window  int

	compacted    bool
	compactFails int
	usage        models.Usage
	turns        int

	mu      sync.Mutex // serialises the sink: tools emit from their goroutines
	sinkErr error
	text    []byte          // text streamed by the current model call
	resp    models.Response // the answer of the current model call
}

// Run runs the loop until a done reason (spec §6.3). It emits error frames itself; the done
// frame is the caller's, after it has stored the result. A handoff changes p's System and
// Tools.
func Run(ctx context.Context, p *Params) Result {
	cancel := p.Cancel
	if cancel == nil {
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
	}
	r := &run{p: p, ctx: ctx, cancel: cancel, log: p.Logger, summary: p.Summary}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.window = p.ContextWindow
	if r.window <= 0 {
		r.window = models.ContextWindow(p.ProviderName, p.Model)
	}
	r.all = make([]models.Message, 0, len(p.History)+len(p.Input)+2) // the answer and one more: each is 152 bytes of every open stream
	r.all = append(r.all, p.History...)
	r.nHist = len(r.all)
	r.all = append(r.all, p.Input...)
	reason, err := r.loop()
	if leftover := p.Queue.Close(); len(leftover) > 0 {
		// Arrived after the last check: keep them in the history so they are not lost.
		r.all = append(r.all, leftover...)
	}
	res := Result{
		Reason: reason, Turns: r.turns, Usage: r.usage, Messages: r.all[r.nHist:], Err: err,
		Interrupted: reason == ReasonUserAbort,
		Compacted:   r.compacted, Summary: r.summary, Covered: r.start,
	}
	if res.Interrupted && (len(res.Messages) == 0 || res.Messages[len(res.Messages)-1].Role != models.RoleAssistant) {
		res.Messages = append(res.Messages, models.Message{Role: models.RoleAssistant})
	}
	return res
}

func (r *run) maxTurns() int {
	if r.p.MaxTurns > 0 {
		return r.p.MaxTurns
	}
	return DefaultMaxTurns
}

func (r *run) overBudget() bool {
	return r.p.Budget > 0 && r.p.Used+r.usage.Total() >= r.p.Budget
}

// loop runs model calls and their tools until a done reason. Its frame and call's are small,
// with the work before and after each call in functions of their own and the answer in the
// run: a turn waiting on its model is what an open stream costs, and the runtime keeps a
// goroutine's stack at 8 KiB only while every frame on it stays well under that.
func (r *run) loop() (Reason, error) {
	if r.p.Budget > 0 && r.p.Used >= r.p.Budget {
		// A run that starts at or over the budget makes no model call.
		r.fixedMessage(ReasonBudgetExceeded)
		return ReasonBudgetExceeded, nil
	}
	for {
		if reason, done := r.beforeCall(); done {
			return reason, nil
		}
		resp, err := r.call(nil)
		if reason, done, err := r.afterCall(resp, err); done {
			return reason, err
		}
	}
}

// beforeCall takes in queued messages and compacts the context before a model call; done when
// the run ends instead.
func (r *run) beforeCall() (_ Reason, done bool) {
	if r.ctx.Err() != nil {
		return ReasonUserAbort, true
	}
	r.all = append(r.all, r.p.Queue.drain()...)
	if r.turns >= r.maxTurns() {
		return r.finish(ReasonMaxTurns), true
	}
	if r.turns > 0 && r.overBudget() {
		return r.finish(ReasonBudgetExceeded), true
	}
	r.maybeCompact()
	if r.ctx.Err() != nil {
		return ReasonUserAbort, true
	}
	return "", false
}

// afterCall records a model call's answer and runs the tools it asks for; done when the run
// ends there.
func (r *run) afterCall(resp *models.Response, err error) (_ Reason, done bool, _ error) {
	r.turns++
	r.usage = r.usage.Add(resp.Usage)
	if err != nil {
		if r.ctx.Err() != nil {
			r.all = append(r.all, models.Message{Role: models.RoleAssistant, Content: string(r.text)})
			return ReasonUserAbort, true, nil
		}
		r.log.WarnContext(r.ctx, "model call failed", "err", err, "turn", r.turns)
		_ = r.emit(&sse.Frame{Type: sse.TypeError, Message: "model call failed: " + err.Error()})
		return ReasonError, true, err
	}
	msg := resp.Message
	msg.Role = models.RoleAssistant
	r.all = append(r.all, msg)
	if len(msg.ToolCalls) == 0 {
		if queued, closed := r.p.Queue.closeIfEmpty(); !closed {
			r.all = append(r.all, queued...)
			return "", false, nil
		}
		return ReasonModelStop, true, nil
	}
	results, end, to := r.runTools(msg.ToolCalls)
	if to != "" && r.ctx.Err() == nil {
		r.handoff(to, results)
	}
	r.all = append(r.all, results...)
	if r.ctx.Err() != nil {
		return ReasonUserAbort, true, nil
	}
	if end {
		return ReasonModelStop, true, nil
	}
	return "", false, nil
}

// call streams one model call over the current view with extra appended, forwarding text and
// reasoning deltas. The answer is the run's until the next call.
func (r *run) call(extra []models.Message) (*models.Response, error) {
	r.text = r.text[:0]
	span := r.startModelSpan("chat")
	var err error
	r.resp, err = r.p.Provider.Stream(r.ctx, r.request(extra), r.onEvent)
	r.endModelSpan(span, "chat", r.resp.Usage, err)
	return &r.resp, err
}

func (r *run) onEvent(ev models.Event) error {
	switch ev.Type {
	case models.EventTextDelta:
		if ev.Text == "" {
			return nil
		}
		r.text = append(r.text, ev.Text...)
		return r.emitDelta(sse.TypeTextDelta, ev.Text)
	case models.EventThinkingDelta:
		if ev.Text == "" {
			return nil
		}
		return r.emitDelta(sse.TypeThinkingDelta, ev.Text)
	}
	return nil // tool calls run once the answer is complete
}

// deltaFrames are the frames streamed deltas are sent in (a sink keeps no frame past its
// Emit): a frame of every run's own would be 720 bytes more for each open stream.
var deltaFrames = sync.Pool{New: func() any { return new(sse.Frame) }}

// emitDelta sends a text or reasoning delta.
func (r *run) emitDelta(typ sse.Type, text string) error {
	f := deltaFrames.Get().(*sse.Frame)
	*f = sse.Frame{Type: typ, Content: text}
	err := r.emit(f)
	*f = sse.Frame{}
	deltaFrames.Put(f)
	return err
}

// emit sends f to the sink; after the first failure it cancels the run and drops frames.
func (r *run) emit(f *sse.Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sinkErr != nil {
		return r.sinkErr
	}
	if err := r.p.Sink.Emit(f); err != nil {
		r.sinkErr = err
		r.cancel(ErrUserAbort)
		return err
	}
	return nil
}

// request builds the model request over the current view, with extra messages appended.
func (r *run) request(extra []models.Message) models.Request {
	msgs := r.all[r.start:]
	view := make([]models.Message, 0, len(msgs)+len(extra)+1)
	if r.summary != "" {
		view = append(view, models.Message{Role: models.RoleUser, Content: summaryPrefix + r.summary})
	}
	toolResults := 0
	for i := range msgs {
		if msgs[i].Role == models.RoleTool {
			toolResults++
		}
	}
	clearBelow := 0 // tool results with an ordinal below this become markers
	if toolResults > clearAbove {
		clearBelow = toolResults - clearKeep
	}
	ordinal := 0
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.Role == models.RoleAssistant && m.Content == "" && len(m.ToolCalls) == 0 && m.Thinking == "":
			continue // an interrupted turn that produced nothing
		case m.Role == models.RoleTool:
			if ordinal < clearBelow {
				c := *m
				c.Content = clearedMarker(m)
				view = append(view, c)
				ordinal++
				continue
			}
			ordinal++
		}
		view = append(view, *m)
	}
	view = append(view, extra...)
	return models.Request{
		Model: r.p.Model, System: r.p.System, Messages: view, Tools: r.p.Tools.Specs(), Effort: r.p.Effort,
	}
}

const summaryPrefix = "Summary of the earlier conversation (older turns were condensed to save context):\n\n"

func clearedMarker(m *models.Message) string {
	return "[tool result cleared to save context: " + m.ToolName + " returned " + strconv.Itoa(len(m.Content)) +
		" characters; call the tool again if you need them]"
}

// runTools runs the calls of one model turn, in parallel when there are several, and returns
// their result messages in call order.
func (r *run) runTools(calls []models.ToolCall) (msgs []models.Message, end bool, handoff string) {
	type outcome struct {
		res tools.Result
		err error
	}
	outs := make([]outcome, len(calls))
	for i := range calls {
		c := &calls[i]
		if c.ID == "" {
			c.ID = "call_" + strconv.Itoa(r.turns) + "_" + strconv.Itoa(i)
		}
		f := sse.Frame{Type: sse.TypeToolCallStart, ToolName: c.Name, ToolID: c.ID, Parameters: c.Arguments}
		if t, ok := r.p.Tools.Get(c.Name); ok {
			if l, ok := t.(tools.Labeler); ok {
				f.RunningLabel, f.CompletedLabel = l.Labels(c.Arguments)
			}
		}
		_ = r.emit(&f) // a failed emit cancels the run; the calls then fail fast
	}
	exec := func(i int) {
		c := &calls[i]
		began := time.Now()
		res, err := r.callTool(c)
		outs[i] = outcome{res, err}
		f := sse.Frame{Type: sse.TypeToolCallResult, ToolID: c.ID, Status: sse.StatusSuccess,
			Content: res.Content, Result: res.Data, DurationMS: time.Since(began).Milliseconds()}
		if err != nil || res.IsError {
			f.Status = sse.StatusError
			if err != nil {
				f.Error, f.Content = err.Error(), "error: "+err.Error()
			} else {
				f.Error = res.Content
			}
		}
		_ = r.emit(&f)
		if w := res.Widget; err == nil && w != nil {
			_ = r.emit(&sse.Frame{Type: sse.TypeWidget, WidgetType: w.Type, Data: w.Data})
		}
	}
	if len(calls) == 1 {
		exec(0)
	} else {
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() { exec(i) })
		}
		wg.Wait()
	}
	msgs = make([]models.Message, len(calls))
	for i, o := range outs {
		m := models.Message{Role: models.RoleTool, ToolCallID: calls[i].ID, ToolName: calls[i].Name, Content: o.res.Content, IsError: o.res.IsError}
		switch {
		case o.err != nil:
			m.Content, m.IsError = "error: "+o.err.Error(), true
		case o.res.EndRun:
			end = true
		}
		if o.err == nil && o.res.Handoff != "" {
			handoff = o.res.Handoff // the last one of the turn wins
		}
		msgs[i] = m
	}
	return msgs, end, handoff
}

// handoff switches the rest of the run to agent to; a refused switch turns the handoff call's
// result in results into an error, so that the model knows it is still the same agent.
func (r *run) handoff(to string, results []models.Message) {
	var sw Switch
	err := errors.New("handoffs are not available in this run")
	if r.p.Handoff != nil {
		sw, err = r.p.Handoff(to)
	}
	if err != nil {
		r.log.WarnContext(r.ctx, "handoff refused", "to", to, "err", err)
		for i := range results {
			if results[i].ToolName == tools.NameHandoff && !results[i].IsError {
				results[i].Content, results[i].IsError = "error: handoff to "+to+" failed: "+err.Error(), true
			}
		}
		return
	}
	r.p.System, r.p.Tools = sw.System, sw.Tools
	if sw.Frame != nil {
		_ = r.emit(sw.Frame)
	}
}

// callTool runs one call: its arguments are checked against the tool's parameter schema first
// (this is the one place every call of the model passes, so no kind of tool escapes the check;
// a refused call runs nothing and asks no approval), then the user's approval is asked when
// the tool wants it. A panic in a tool is its error, not the runtime's.
func (r *run) callTool(c *models.ToolCall) (res tools.Result, err error) {
	t, ok := r.p.Tools.Get(c.Name)
	if !ok {
		return tools.Result{}, fmt.Errorf("tool %q is not available to this agent", c.Name)
	}
	if err := context.Cause(r.ctx); err != nil {
		return tools.Result{}, fmt.Errorf("cancelled: %w", err)
	}
	defer func() {
		if v := recover(); v != nil {
			r.log.ErrorContext(r.ctx, "tool panicked", "tool", c.Name, "panic", v)
			res, err = tools.Result{}, fmt.Errorf("tool %s failed: internal error", c.Name)
		}
	}()
	call := tools.Call{ID: c.ID, Arguments: c.Arguments, Host: host{r}, Session: r.p.Session}
	ctx, end := r.startToolSpan(c.Name, c.ID)
	defer func() { end(res.IsError, err) }()
	if err := r.p.Tools.Check(c.Name, c.Arguments); err != nil {
		return tools.Result{}, err
	}
	if ap, ok := t.(tools.Approver); ok {
		req, err := ap.NeedsApproval(ctx, call)
		if err != nil {
			return tools.Result{}, err
		}
		if req != nil {
			if err := r.approve(c, req); err != nil {
				return tools.Result{}, err
			}
		}
	}
	return t.Call(ctx, call)
}

// approve asks the user to approve call c and waits: nil when approved, else why the call
// must not run (denied, no answer in time, or the run ended while it waited).
func (r *run) approve(c *models.ToolCall, req *tools.ApprovalRequest) error {
	if r.p.Approvals == nil {
		return errors.New("this call needs the user's approval, which this run cannot ask for")
	}
	id, err := r.p.Approvals.Request(r.ctx, c.Name, c.ID)
	if err != nil {
		return fmt.Errorf("ask for approval: %w", err)
	}
	if err := r.emit(&sse.Frame{Type: sse.TypeConfirmationRequired, CorrelationID: id, ToolName: c.Name, ToolID: c.ID,
		Endpoint: req.Endpoint, Method: req.Method, ApprovalReason: req.Reason, Escalated: req.Escalated,
		Parameters: c.Arguments, ConnectionName: req.Connection}); err != nil {
		return fmt.Errorf("cancelled: %w", err)
	}
	approved, timedOut, err := r.p.Approvals.Wait(r.ctx, id)
	if err != nil {
		return fmt.Errorf("cancelled while waiting for approval: %w", err)
	}
	f := sse.Frame{Type: sse.TypeDenied, ResourceType: "tool_call", PreviewID: id, ToolID: c.ID, TimedOut: timedOut}
	if approved {
		f.Type = sse.TypeApproved
	}
	_ = r.emit(&f)
	switch {
	case approved:
		return nil
	case timedOut:
		return errors.New("no answer to the approval request in time: the call was denied and not made")
	}
	return errors.New("the user denied this call: it was not made")
}

// host is the tools.Host of a run.
type host struct{ r *run }

// Emit implements tools.Host.
func (h host) Emit(f *sse.Frame) error { return h.r.emit(f) }

// ActivateSkill implements tools.Host.
func (h host) ActivateSkill(name string) {
	if h.r.p.OnSkill != nil {
		h.r.p.OnSkill(name)
	}
}

// NoteKnowledge implements tools.Host.
func (h host) NoteKnowledge(name string) {
	if h.r.p.OnKnowledge != nil {
		h.r.p.OnKnowledge(name)
	}
}
