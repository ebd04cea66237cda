package handlers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"svc/runner/durable"
	"svc/runner/sandbox"
	"svc/runner/sse"
	"svc/runner/tools"
)

// Journal is what one execution of a durable handler replays and records (package durable):
// the values of its journaled calls by key.
type Journal struct {
	// Recorded holds the values that earlier executions recorded, by key.
	Recorded map[string]json.RawMessage
	// Record writes a new entry, or keeps it to be written by the next Flush. An error ends the
	// execution with that error (for example when another executor claimed the run).
	Record func(ctx context.Context, key string, value json.RawMessage) error
	// Flush, when set, writes the entries Record kept. The handler's host calls it before each
	// child tool or subagent call, whose effects reach outside the run: what the run did before
	// them is then durable. An error ends the execution.
	Flush func(ctx context.Context) error
	// Now is the clock of ctx.now() and of sleeps; nil means time.Now.
	Now func() time.Time
}

func (j *Journal) now() time.Time {
	if j.Now == nil {
		return time.Now()
	}
	return j.Now()
}

// minWait is the least time a call waits for a sandbox worker, free or started.
const minWait = 10 * time.Second

// exec runs one call (j nil) or one durable execution in a sandbox worker, and serves what the
// handler asks of the outside while it runs.
func (t *Tool) exec(ctx context.Context, call tools.Call, j *Journal) (tools.Result, *durable.Pause, error) {
	if err := context.Cause(ctx); err != nil {
		return tools.Result{}, nil, fmt.Errorf("handler %s not started: %w", t.def.Name, err)
	}
	depth := depthOf(ctx) + 1
	if depth > t.opts.MaxDepth {
		return tools.Result{}, nil, fmt.Errorf("handler %s: tools calling tools nest %d deep, over the limit of %d (SVC_COMPOSITE_MAX_DEPTH)", t.def.Name, depth, t.opts.MaxDepth)
	}
	ctx = context.WithValue(ctx, depthKey{}, depth)
	if len(call.Arguments) > 0 && !json.Valid(call.Arguments) {
		return tools.Result{}, nil, fmt.Errorf("%w: the arguments of %s are not JSON", tools.ErrBadArguments, t.def.Name)
	}
	if j != nil && call.Session.Calls == nil {
		call.Session.Calls = new(atomic.Int64)
	}

	// Waiting for a worker (or for one to start, slow on a loaded machine) has a bound of its
	// own, as long as the call's and at least minWait: the deadline is the handler's own time.
	pool := t.opts.Sandbox
	wait, stopWait := context.WithTimeoutCause(ctx, max(t.opts.Timeout, minWait), ErrDeadline)
	w, err := pool.Acquire(wait, t.opts.Key, depth > 1)
	stopWait()
	if err != nil {
		if errors.Is(err, ErrDeadline) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return tools.Result{}, nil, fmt.Errorf("handler %s found no sandbox worker free within %s (%v): %w", t.def.Name, max(t.opts.Timeout, minWait), err, ErrDeadline) //nolint:errorlint // the wait is described; the deadline is what callers test
		}
		if ctx.Err() != nil {
			return tools.Result{}, nil, fmt.Errorf("handler %s not started: %w", t.def.Name, context.Cause(ctx))
		}
		return tools.Result{}, nil, fmt.Errorf("handler %s: %w", t.def.Name, err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, t.opts.Timeout, ErrDeadline)
	defer cancel()

	// When ctx ends, ask the worker to interrupt the call; kill it if it has not answered
	// Grace later (code stuck in a built-in call cannot be interrupted).
	var mu sync.Mutex
	var kill *time.Timer
	asked := make(chan struct{})
	loan := w.Loan()
	stop := context.AfterFunc(ctx, func() {
		defer close(asked)
		_ = w.Control(controlFrame(opCancel, loan)) // a dead worker is noticed by the serve loop
		mu.Lock()
		kill = time.AfterFunc(pool.Grace(), func() { w.Kill(sandbox.ErrOverran) })
		mu.Unlock()
	})
	h := &hostCall{t: t, w: w, loan: loan, ctx: ctx, call: call, j: j, depth: depth}
	res, pause, clean, err := h.serve()
	if !stop() {
		<-asked
		mu.Lock()
		if !kill.Stop() {
			clean = false // killed, or about to be
		}
		mu.Unlock()
	}
	pool.Release(w, clean)
	return res, pause, err
}

// controlFrame is a frame of the control pipe: op (cancel, stop) for the call of loan.
func controlFrame(op string, loan uint64) []byte {
	return (&message{Op: op, Loan: loan}).encode(nil)
}

// ended is the error of a call whose ctx ended: its deadline, or the cause it was cancelled with.
func (t *Tool) ended(ctx context.Context) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrDeadline) {
		return fmt.Errorf("handler %s ran past its %s deadline: %w", t.def.Name, t.opts.Timeout, ErrDeadline)
	}
	return fmt.Errorf("handler %s stopped: %w", t.def.Name, cause)
}

// hostCall is the host side of one call in a worker.
type hostCall struct {
	t        *Tool
	w        *sandbox.Proc
	loan     uint64 // w.Loan(): names the call in control frames
	ctx      context.Context
	call     tools.Call
	j        *Journal
	depth    int
	children int    // ctx.callTool calls made so far, for their ids
	stopErr  error  // a journal write failed: the execution ends with it
	buf      []byte // the last frame sent, encoded
}

// serve sends the call and answers the worker until it is done. clean reports that the worker
// ended the call as the protocol says, and can take another.
func (h *hostCall) serve() (res tools.Result, pause *durable.Pause, clean bool, err error) {
	if err := h.send(message{Op: opCall, Loan: h.loan, Call: h.spec()}); err != nil {
		return tools.Result{}, nil, false, h.died(err)
	}
	for {
		b, err := h.w.Recv()
		if err != nil {
			return tools.Result{}, nil, false, h.died(err)
		}
		m, err := decodeMessage(b)
		if err != nil {
			h.w.Kill(nil)
			return tools.Result{}, nil, false, fmt.Errorf("handler %s: the sandbox worker sent a bad frame: %w", h.t.def.Name, err)
		}
		switch m.Op {
		case opNeed:
			err = h.send(message{Op: opJS, Digest: h.t.digest, JS: h.t.def.JS})
		case opEmit:
			h.emit(m.Frame)
		case opRecord:
			h.record(m.Key, m.Value)
		case opRPC:
			reply := h.rpc(m)
			reply.Op, reply.Seq = opReply, m.Seq
			err = h.send(reply)
		case opDone:
			res, pause, err := h.finish(m.Outcome)
			return res, pause, true, err
		default:
			h.w.Kill(nil)
			return tools.Result{}, nil, false, fmt.Errorf("handler %s: the sandbox worker sent an unknown frame %q", h.t.def.Name, m.Op)
		}
		if err != nil {
			return tools.Result{}, nil, false, h.died(err)
		}
	}
}

func (h *hostCall) send(m message) error {
	h.buf = m.encode(h.buf[:0])
	return h.w.Send(h.buf)
}

// died is the error of a call whose worker died or was killed.
func (h *hostCall) died(err error) error {
	if h.ctx.Err() != nil {
		return h.t.ended(h.ctx)
	}
	if h.stopErr != nil {
		return h.stopErr
	}
	return fmt.Errorf("handler %s was stopped: %w", h.t.def.Name, err)
}

// spec is what the worker needs to run the call.
func (h *hostCall) spec() *callSpec {
	t, o := h.t, h.t.opts
	s := &callSpec{Tool: t.def.Name, Digest: t.digest, SourcePath: t.def.SourcePath, Layout: t.def.Layout,
		UsesTools: t.def.Uses.Tools, UsesAgents: t.def.Uses.Subagents,
		Children: o.Children != nil, Subagents: o.Subagent != nil,
		MaxResultBytes: o.MaxResultBytes, MaxLogLines: o.MaxLogLines, MaxLogBytes: o.MaxLogBytes,
		MaxDepth: o.MaxDepth, Depth: h.depth,
		ID: h.call.ID, SessionID: h.call.Session.ID, Args: h.call.Arguments}
	if len(s.Args) == 0 {
		s.Args = json.RawMessage("{}")
	}
	for _, f := range h.call.Session.Attachments {
		s.Files = append(s.Files, fileInfo{Filename: f.Filename, MimeType: f.MimeType, Delivery: f.Delivery, Size: len(f.Data)})
	}
	if h.j != nil {
		s.Durable, s.Recorded = true, h.j.Recorded
	}
	return s
}

// emit sends a handler's frame to the client; nothing after the execution was stopped.
func (h *hostCall) emit(f *emitFrame) {
	if f == nil || h.stopErr != nil || h.call.Host == nil {
		return
	}
	fr := &sse.Frame{ToolName: h.t.def.Name}
	switch sse.Type(f.Type) {
	case sse.TypeToolLog:
		fr.Type, fr.Message = sse.TypeToolLog, f.Message
	case sse.TypeToolLabelUpdate:
		fr.Type, fr.ToolName, fr.ToolID = sse.TypeToolLabelUpdate, "", h.call.ID
		fr.RunningLabel, fr.CompletedLabel = f.RunningLabel, f.CompletedLabel
	case sse.TypeWidget:
		if !json.Valid(f.Data) { // the worker checked it; a broken one is dropped, not sent
			return
		}
		fr.Type, fr.ToolName, fr.WidgetType, fr.Data = sse.TypeWidget, "", f.WidgetType, f.Data
	default:
		return
	}
	_ = h.call.Host.Emit(fr) // a failed emit ends the turn, which cancels the call
}

// record writes a journal entry; a failure stops the execution.
func (h *hostCall) record(key string, value json.RawMessage) {
	if h.stopErr != nil || h.j == nil || h.j.Record == nil {
		return
	}
	if err := h.j.Record(h.ctx, key, value); err != nil {
		h.stop(fmt.Errorf("handler %s: record %s: %w", h.t.def.Name, key, err))
	}
}

// stop ends the execution with err: the worker interrupts the handler, and nothing it does
// after reaches the outside.
func (h *hostCall) stop(err error) {
	h.stopErr = err
	_ = h.w.Control(controlFrame(opStop, h.loan)) // a dead worker is noticed by the serve loop
}

// flush makes the journal durable before a call with effects outside the run.
func (h *hostCall) flush() error {
	if h.j == nil || h.j.Flush == nil {
		return nil
	}
	if err := h.j.Flush(h.ctx); err != nil {
		h.stop(fmt.Errorf("handler %s: record the journal: %w", h.t.def.Name, err))
		return h.stopErr
	}
	return nil
}

// rpc does what the handler asked for; the reply's Error is what the handler throws after the
// name of the method ("failed: ..."), and Stop ends the execution.
func (h *hostCall) rpc(m message) message {
	if h.stopErr != nil {
		return message{Error: h.stopErr.Error(), Stop: true}
	}
	switch m.Method {
	case rpcCallTool:
		return h.callTool(m.Name, m.Args)
	case rpcCallSubagent:
		return h.callSubagent(m)
	case rpcFlush:
		if err := h.flush(); err != nil {
			return message{Error: err.Error(), Stop: true}
		}
		return message{}
	case rpcNow:
		now := time.Now()
		if h.j != nil {
			now = h.j.now()
		}
		v, _ := json.Marshal(now.UTC().Format(time.RFC3339Nano)) // a string: cannot fail
		return message{Value: v}
	case rpcFiles:
		return message{Value: h.files()}
	}
	return message{Error: "is not a method of the sandbox: " + m.Method}
}

// countCall counts a call of a child against the turn's limit.
func (h *hostCall) countCall() error {
	if counter := h.call.Session.Calls; counter != nil {
		if n := counter.Add(1); n > int64(h.t.opts.MaxCalls) {
			return fmt.Errorf("is over the limit of %d tool calls by tools in one turn (SVC_COMPOSITE_MAX_CALLS)", h.t.opts.MaxCalls)
		}
	}
	return nil
}

// callTool runs a child tool for ctx.callTool; the worker checked that the handler declares it.
func (h *hostCall) callTool(name string, args json.RawMessage) message {
	if h.t.opts.Children == nil {
		return message{Error: "is not available to this handler"}
	}
	if err := h.countCall(); err != nil {
		return message{Error: err.Error()}
	}
	child, err := h.t.opts.Children(name)
	if err != nil {
		return message{Error: "failed: " + err.Error()}
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	// The child's schema holds for a handler's calls as for the model's (the loop checks those).
	if err := h.t.opts.Schemas.Check(child.Spec(), args); err != nil {
		return message{Error: "failed: " + err.Error()}
	}
	h.children++
	call := tools.Call{ID: h.call.ID + "." + strconv.Itoa(h.children), Arguments: args, Host: h.call.Host, Session: h.call.Session}
	if ap, ok := child.(tools.Approver); ok && h.j == nil { // durable calls are not confirmed (rule 4)
		req, err := ap.NeedsApproval(h.ctx, call)
		if err != nil {
			return message{Error: "failed: " + err.Error()}
		}
		if req != nil {
			return message{Error: "is not allowed: " + name + " asks the user first, which an inline tool cannot wait for"}
		}
	}
	if err := h.flush(); err != nil {
		return message{Error: err.Error(), Stop: true}
	}
	h.startCard(child, name, call)
	began := time.Now()
	res, err := child.Call(h.ctx, call)
	h.endCard(call.ID, res, err, time.Since(began))
	switch {
	case err != nil:
		return message{Error: "failed: " + err.Error()}
	case res.IsError:
		return message{Error: "failed: " + res.Content}
	}
	raw := res.Data
	if len(raw) == 0 {
		raw, _ = json.Marshal(res.Content) // a string: cannot fail
	}
	return message{Value: raw}
}

// startCard streams the tool_call_start of a child's call, nested under this call's card
// (spec 4.7 rule 3): parent_tool_id is this call's id, at any depth.
func (h *hostCall) startCard(child tools.Tool, name string, call tools.Call) {
	if h.call.Host == nil || h.stopErr != nil {
		return
	}
	f := &sse.Frame{Type: sse.TypeToolCallStart, ToolName: name, ToolID: call.ID, Parameters: call.Arguments, ParentToolID: h.call.ID}
	if l, ok := child.(tools.Labeler); ok {
		f.RunningLabel, f.CompletedLabel = l.Labels(call.Arguments)
	}
	_ = h.call.Host.Emit(f) // a failed emit ends the turn, which cancels the call
}

// endCard streams the tool_call_result of a child's call, as the loop does for the model's.
func (h *hostCall) endCard(id string, res tools.Result, err error, took time.Duration) {
	if h.call.Host == nil || h.stopErr != nil {
		return
	}
	f := &sse.Frame{Type: sse.TypeToolCallResult, ToolID: id, Status: sse.StatusSuccess, ParentToolID: h.call.ID,
		Content: res.Content, Result: res.Data, DurationMS: took.Milliseconds()}
	switch {
	case err != nil:
		f.Status, f.Error, f.Content = sse.StatusError, err.Error(), "error: "+err.Error()
	case res.IsError:
		f.Status, f.Error = sse.StatusError, res.Content
	}
	_ = h.call.Host.Emit(f)
	if w := res.Widget; err == nil && w != nil {
		_ = h.call.Host.Emit(&sse.Frame{Type: sse.TypeWidget, WidgetType: w.Type, Data: w.Data})
	}
}

// callSubagent runs a specialist for ctx.callSubagent; the worker checked the declaration, the
// task, the depth and the file names.
func (h *hostCall) callSubagent(m message) message {
	if h.t.opts.Subagent == nil {
		return message{Error: "is not available to this handler"}
	}
	if err := h.countCall(); err != nil {
		return message{Error: err.Error()}
	}
	var files []tools.Attachment
	for _, name := range m.Files {
		for _, f := range h.call.Session.Attachments {
			if f.Filename == name {
				files = append(files, f)
				break
			}
		}
	}
	if err := h.flush(); err != nil {
		return message{Error: err.Error(), Stop: true}
	}
	ctx := context.WithValue(h.ctx, depthKey{}, h.depth+1)
	text, err := h.t.opts.Subagent(ctx, m.Name, m.Task, m.Args, files, h.call)
	if err != nil {
		return message{Error: "failed: " + err.Error()}
	}
	v, _ := json.Marshal(text) // a string: cannot fail
	return message{Value: v}
}

// files is ctx.attachments: the files of the turn's message, each {filename, mimeType,
// delivery, size, data (base64)} and text (the content) for a text type.
func (h *hostCall) files() json.RawMessage {
	out := make([]map[string]any, 0, len(h.call.Session.Attachments))
	for _, f := range h.call.Session.Attachments {
		a := map[string]any{"filename": f.Filename, "mimeType": f.MimeType, "delivery": f.Delivery,
			"size": len(f.Data), "data": base64.StdEncoding.EncodeToString(f.Data)}
		if strings.HasPrefix(f.MimeType, "text/") || f.MimeType == "application/json" {
			a["text"] = string(f.Data)
		}
		out = append(out, a)
	}
	b, _ := json.Marshal(out) // plain values: cannot fail
	return b
}

// finish turns the worker's outcome into the call's.
func (h *hostCall) finish(o *outcome) (tools.Result, *durable.Pause, error) {
	switch {
	case h.stopErr != nil:
		return tools.Result{}, nil, h.stopErr
	case o == nil:
		return tools.Result{}, nil, fmt.Errorf("handler %s: the sandbox worker sent no outcome", h.t.def.Name)
	case o.Err != nil:
		return tools.Result{}, nil, h.error(o.Err)
	case o.Pause != nil:
		return tools.Result{}, o.Pause, nil
	}
	return tools.Result{Content: o.Content, Data: o.Data}, nil, nil
}

// error rebuilds the error of a call from the worker's description of it.
func (h *hostCall) error(e *wireError) error {
	switch e.Kind {
	case errThrew:
		return &Error{Tool: e.Tool, Message: e.Message, File: e.File, Line: e.Line, Column: e.Column}
	case errInterrupted:
		if h.ctx.Err() != nil {
			return h.t.ended(h.ctx)
		}
		return fmt.Errorf("handler %s was interrupted", h.t.def.Name)
	case errBadArgs:
		return &remoteError{e.Message, tools.ErrBadArguments}
	case errTooBig:
		return &remoteError{e.Message, ErrResultTooBig}
	case errNotSettled:
		return &remoteError{e.Message, ErrNotSettled}
	}
	return errors.New(e.Message)
}

// remoteError is an error a worker described: its message, and the sentinel it wraps.
type remoteError struct {
	msg string
	is  error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.is }
