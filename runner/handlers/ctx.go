package handlers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"

	"svc/agent"
	"svc/runner/sse"
	"svc/runner/tools"
)

// callCtx is the state of one call that the handler reaches through its ctx argument and the
// console. Its methods are the one place where ctx methods are defined (see methods). It lives on
// the call's goroutine, like its runtime.
type callCtx struct {
	ctx      context.Context
	t        *Tool
	vm       *goja.Runtime
	call     tools.Call
	logs     int // log lines emitted (or dropped) so far
	children int // ctx.callTool calls made so far
	durableState
}

func newCallCtx(ctx context.Context, t *Tool, vm *goja.Runtime, call tools.Call) *callCtx {
	return &callCtx{ctx: ctx, t: t, vm: vm, call: call}
}

// depthKey keys the depth of nested handler calls in a context.
type depthKey struct{}

func depthOf(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}

// durableOnly lists the ctx methods of spec 4.7 that only durable handlers have; in an inline
// handler calling one throws.
var durableOnly = []string{
	"requestInput", "waitForApproval", "step", "sleepUntil", "now", "random",
}

// methods are the functions of the handler's ctx object, by name.
func (c *callCtx) methods() map[string]func(goja.FunctionCall) goja.Value {
	m := map[string]func(goja.FunctionCall) goja.Value{
		"log":          c.logger(""),
		"setLabel":     c.setLabel,
		"callTool":     c.callTool,
		"callSubagent": c.callSubagent,
	}
	if c.t.opts.Children == nil || c.t.def.Layout == agent.LayoutToolTS {
		m["callTool"] = c.notAvailable("callTool")
	}
	if c.t.opts.Subagent == nil || c.t.def.Layout == agent.LayoutToolTS {
		m["callSubagent"] = c.notAvailable("callSubagent")
	}
	if c.journal != nil {
		c.durableMethods(m)
		return m
	}
	for _, name := range durableOnly {
		m[name] = c.notAvailable(name)
	}
	return m
}

// object builds the handler's ctx argument.
func (c *callCtx) object() *goja.Object {
	o := c.vm.NewObject()
	for name, fn := range c.methods() {
		c.must(o.Set(name, fn))
	}
	c.must(o.Set("toolName", c.t.def.Name))
	c.must(o.Set("callId", c.call.ID))
	c.must(o.Set("sessionId", c.call.Session.ID))
	if depthOf(c.ctx) == 1 { // top-level handlers only (spec 4.7)
		c.must(o.Set("attachments", c.attachments()))
	}
	if c.journal != nil {
		c.bindDurable(o)
	}
	return o
}

// bindGlobals sets the globals a handler may use besides ctx: console.
func (c *callCtx) bindGlobals() {
	console := c.vm.NewObject()
	c.must(console.Set("log", c.logger("")))
	c.must(console.Set("info", c.logger("")))
	c.must(console.Set("debug", c.logger("")))
	c.must(console.Set("warn", c.logger("warn: ")))
	c.must(console.Set("error", c.logger("error: ")))
	c.must(c.vm.Set("console", console))
}

// require refuses every module: a handler is one file, and reaches the outside through ctx.
func (c *callCtx) require(name string) goja.Value {
	panic(c.vm.NewGoError(&notAvailableError{"require(" + quote(name) + ")", "not available: a handler cannot import modules"}))
}

// logger returns a log function whose lines are prefixed with prefix.
func (c *callCtx) logger(prefix string) func(goja.FunctionCall) goja.Value {
	return func(fc goja.FunctionCall) goja.Value {
		limit := c.t.opts.MaxLogLines
		c.logs++
		switch {
		case c.logs == limit+1:
			c.emit(&sse.Frame{Type: sse.TypeToolLog, ToolName: c.t.def.Name,
				Message: "(further log lines of this call are dropped)"})
			return goja.Undefined()
		case c.logs > limit:
			return goja.Undefined()
		}
		parts := make([]string, len(fc.Arguments))
		for i, a := range fc.Arguments {
			parts[i] = c.format(a)
		}
		msg := truncate(prefix+strings.Join(parts, " "), c.t.opts.MaxLogBytes)
		c.emit(&sse.Frame{Type: sse.TypeToolLog, ToolName: c.t.def.Name, Message: msg})
		return goja.Undefined()
	}
}

// setLabel is ctx.setLabel(running, completed?): it changes the labels of the call's card.
func (c *callCtx) setLabel(fc goja.FunctionCall) goja.Value {
	f := &sse.Frame{Type: sse.TypeToolLabelUpdate, ToolID: c.call.ID}
	if a := fc.Argument(0); !goja.IsUndefined(a) && !goja.IsNull(a) {
		f.RunningLabel = truncate(a.String(), DefaultMaxLabelBytes)
	}
	if a := fc.Argument(1); !goja.IsUndefined(a) && !goja.IsNull(a) {
		f.CompletedLabel = truncate(a.String(), DefaultMaxLabelBytes)
	}
	c.emit(f)
	return goja.Undefined()
}

// attachments is ctx.attachments: the files of the turn's message, each {filename, mimeType,
// delivery, size, data (base64)} and text (the content) for a text type.
func (c *callCtx) attachments() goja.Value {
	files := c.call.Session.Attachments
	out := make([]any, 0, len(files))
	for _, f := range files {
		a := map[string]any{"filename": f.Filename, "mimeType": f.MimeType, "delivery": f.Delivery,
			"size": len(f.Data), "data": base64.StdEncoding.EncodeToString(f.Data)}
		if strings.HasPrefix(f.MimeType, "text/") || f.MimeType == "application/json" {
			a["text"] = string(f.Data)
		}
		out = append(out, a)
	}
	return c.vm.ToValue(out)
}

// callTool is ctx.callTool(name, input): it runs a tool the handler declares in uses.tools and
// returns its result (parsed JSON, or text); a failed call throws. An inline handler cannot call
// the connection request tool nor a tool that asks the user first: it cannot wait for them (spec
// 4.7 rules 1 and 4).
func (c *callCtx) callTool(fc goja.FunctionCall) goja.Value {
	name := fc.Argument(0).String()
	what := "ctx.callTool(" + quote(name) + ")"
	if !slices.Contains(c.t.def.Uses.Tools, name) {
		c.throw(what, "is not allowed: "+name+" is not in uses.tools of "+c.t.def.Name)
	}
	if name == "request" && c.journal == nil {
		c.throw(what, "is not allowed: an inline tool cannot call connections, whose calls may ask the user first")
	}
	var key string
	if c.journal != nil { // a completed call returns its record (spec 4.7 rule 5)
		key = c.key("tool", name)
		if raw, ok := c.recorded(key); ok {
			return c.parse(raw)
		}
	}
	if counter := c.call.Session.Calls; counter != nil {
		if n := counter.Add(1); n > int64(c.t.opts.MaxCalls) {
			c.throw(what, fmt.Sprintf("is over the limit of %d tool calls by tools in one turn (SVC_COMPOSITE_MAX_CALLS)", c.t.opts.MaxCalls))
		}
	}
	child, err := c.t.opts.Children(name)
	if err != nil {
		c.throw(what, "failed: "+err.Error())
	}
	args := "{}"
	if in := fc.Argument(1); !goja.IsUndefined(in) && !goja.IsNull(in) {
		s, err := jsonStringify(c.vm, in)
		if err != nil {
			panic(err)
		}
		args = s
	}
	c.children++
	call := tools.Call{ID: c.call.ID + "." + strconv.Itoa(c.children), Arguments: json.RawMessage(args), Host: c.call.Host, Session: c.call.Session}
	if ap, ok := child.(tools.Approver); ok && c.journal == nil { // durable calls are not confirmed (rule 4)
		req, err := ap.NeedsApproval(c.ctx, call)
		if err != nil {
			c.throw(what, "failed: "+err.Error())
		}
		if req != nil {
			c.throw(what, "is not allowed: "+name+" asks the user first, which an inline tool cannot wait for")
		}
	}
	c.flush()
	res, err := child.Call(c.ctx, call)
	switch {
	case err != nil:
		c.throw(what, "failed: "+err.Error())
	case res.IsError:
		c.throw(what, "failed: "+res.Content)
	}
	raw := res.Data
	if len(raw) == 0 {
		raw, _ = json.Marshal(res.Content) // a string: cannot fail
	}
	if c.journal != nil {
		c.record(key, raw)
	}
	return c.parse(raw)
}

// callSubagent is ctx.callSubagent(name, task, input?): it runs a specialist of uses.subagents
// on task and returns its answer; a hard failure throws (spec 4.7 rules 1 and 2).
func (c *callCtx) callSubagent(fc goja.FunctionCall) goja.Value {
	name := fc.Argument(0).String()
	what := "ctx.callSubagent(" + quote(name) + ")"
	if !slices.Contains(c.t.def.Uses.Subagents, name) {
		c.throw(what, "is not allowed: "+name+" is not in uses.subagents of "+c.t.def.Name)
	}
	task := fc.Argument(1)
	if goja.IsUndefined(task) || goja.IsNull(task) || task.String() == "" {
		c.throw(what, "needs a task: ctx.callSubagent(name, task, input?)")
	}
	var input json.RawMessage
	if in := fc.Argument(2); !goja.IsUndefined(in) && !goja.IsNull(in) {
		s, err := jsonStringify(c.vm, in)
		if err != nil {
			panic(err)
		}
		input = json.RawMessage(s)
	}
	if counter := c.call.Session.Calls; counter != nil {
		if n := counter.Add(1); n > int64(c.t.opts.MaxCalls) {
			c.throw(what, fmt.Sprintf("is over the limit of %d tool calls by tools in one turn (SVC_COMPOSITE_MAX_CALLS)", c.t.opts.MaxCalls))
		}
	}
	if depthOf(c.ctx)+1 > c.t.opts.MaxDepth {
		c.throw(what, fmt.Sprintf("would nest deeper than the limit of %d (SVC_COMPOSITE_MAX_DEPTH)", c.t.opts.MaxDepth))
	}
	ctx := context.WithValue(c.ctx, depthKey{}, depthOf(c.ctx)+1)
	files, err := c.subagentFiles(fc.Argument(3))
	if err != nil {
		c.throw(what, err.Error())
	}
	var key string
	if c.journal != nil {
		key = c.key("agent", name)
		if raw, ok := c.recorded(key); ok {
			return c.parse(raw)
		}
	}
	c.flush()
	text, err := c.t.opts.Subagent(ctx, name, task.String(), input, files, c.call)
	if err != nil {
		c.throw(what, "failed: "+err.Error())
	}
	if c.journal != nil {
		raw, _ := json.Marshal(text) // a string: cannot fail
		c.record(key, raw)
	}
	return c.vm.ToValue(text)
}

// subagentFiles reads opts.attachments of ctx.callSubagent: files of the turn (ctx.attachments),
// named by filename or given as the objects ctx.attachments holds.
func (c *callCtx) subagentFiles(opts goja.Value) ([]tools.Attachment, error) {
	if goja.IsUndefined(opts) || goja.IsNull(opts) {
		return nil, nil
	}
	o, ok := opts.(*goja.Object)
	if !ok {
		return nil, errors.New("opts must be an object such as {attachments: [\"report.pdf\"]}")
	}
	list := o.Get("attachments")
	if list == nil || goja.IsUndefined(list) || goja.IsNull(list) {
		return nil, nil
	}
	items, ok := list.Export().([]any)
	if !ok {
		return nil, errors.New("opts.attachments must be a list of filenames or of ctx.attachments items")
	}
	var out []tools.Attachment
	for i, it := range items {
		name, _ := it.(string)
		if m, ok := it.(map[string]any); ok {
			name, _ = m["filename"].(string)
		}
		found := false
		for _, f := range c.call.Session.Attachments {
			if f.Filename == name {
				out, found = append(out, f), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("opts.attachments[%d]: no file %q among this turn's attachments", i, name)
		}
	}
	return out, nil
}

// throw throws an error about what into the handler: "what why".
func (c *callCtx) throw(what, why string) {
	panic(c.vm.NewGoError(errors.New(what + " " + why)))
}

// notAvailable returns a function that throws: ctx.name is not bound in this runtime.
func (c *callCtx) notAvailable(name string) func(goja.FunctionCall) goja.Value {
	why := "not available to this handler"
	switch {
	case c.t.def.Layout == agent.LayoutToolTS && (name == "callTool" || name == "callSubagent"):
		why = "not bound for a tool.ts tool"
	case slices.Contains(durableOnly, name):
		why = `only available in a durable tool ("execution": "durable" in tool.json)`
	}
	return func(goja.FunctionCall) goja.Value {
		panic(c.vm.NewGoError(&notAvailableError{"ctx." + name, why}))
	}
}

// emit sends f through the call's host. A failed emit is not the handler's concern: the loop
// cancels the run, which interrupts the handler.
func (c *callCtx) emit(f *sse.Frame) {
	if c.call.Host != nil {
		_ = c.call.Host.Emit(f)
	}
}

// format renders one log argument: strings as they are, other values as JSON when they have
// JSON, else as JavaScript would print them.
func (c *callCtx) format(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) {
		return "undefined"
	}
	if s, ok := v.Export().(string); ok {
		return s
	}
	if o, ok := v.(*goja.Object); ok {
		if _, isFn := goja.AssertFunction(o); !isFn && o.ClassName() != "Error" {
			if s, err := jsonStringify(c.vm, v); err == nil && s != "" {
				return s
			}
		}
	}
	return v.String()
}

// must panics with err: the setters above fail only on frozen or exotic objects, which these
// fresh ones are not; Call recovers.
func (c *callCtx) must(err error) {
	if err != nil {
		panic(err)
	}
}

// notAvailableError is thrown into the handler by a ctx method this runtime does not bind.
type notAvailableError struct{ what, why string }

func (e *notAvailableError) Error() string { return e.what + " is " + e.why }

// truncate cuts s to at most n bytes on a rune boundary, marking the cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:max(cut, 0)] + mark
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
