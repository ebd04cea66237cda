package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"

	"svc/agent"
	"svc/runner/sse"
)

// callCtx is the state of one call that the handler reaches through its ctx argument and the
// console, inside a sandbox worker. Its methods are the one place where ctx methods are defined
// (see methods). It lives on the call's goroutine, like its runtime.
type callCtx struct {
	ctx      context.Context
	t        *engine
	vm       *goja.Runtime
	out      outside
	logs     int // log lines emitted (or dropped) so far
	children int // ctx.callTool calls made so far
	durableState
}

// outside is what a call reaches beyond its runtime: the host, through the worker.
type outside interface {
	// emit sends a frame to the client; it does not wait.
	emit(f *emitFrame)
	// record sends a journal entry; it does not wait (a failure comes back as a stop).
	record(key string, value json.RawMessage)
	// rpc asks the host for m.Method and returns its reply.
	rpc(m message) message
}

func newCallCtx(ctx context.Context, e *engine, vm *goja.Runtime, out outside) *callCtx {
	c := &callCtx{ctx: ctx, t: e, vm: vm, out: out}
	c.durable, c.recordedMap = e.spec.Durable, e.spec.Recorded
	return c
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
		"widget":       c.widget,
		"callTool":     c.callTool,
		"callSubagent": c.callSubagent,
	}
	if !c.t.spec.Children || c.t.spec.Layout == agent.LayoutToolTS {
		m["callTool"] = c.notAvailable("callTool")
	}
	if !c.t.spec.Subagents || c.t.spec.Layout == agent.LayoutToolTS {
		m["callSubagent"] = c.notAvailable("callSubagent")
	}
	if c.durable {
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
	c.must(o.Set("toolName", c.t.spec.Tool))
	c.must(o.Set("callId", c.t.spec.ID))
	c.must(o.Set("sessionId", c.t.spec.SessionID))
	if c.t.spec.Depth == 1 { // top-level handlers only (spec 4.7)
		c.must(o.DefineAccessorProperty("attachments", c.vm.ToValue(c.attachments), nil, goja.FLAG_FALSE, goja.FLAG_TRUE))
	}
	if c.durable {
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
		limit := c.t.spec.MaxLogLines
		c.logs++
		switch {
		case c.logs == limit+1:
			c.out.emit(&emitFrame{Type: string(sse.TypeToolLog), Message: "(further log lines of this call are dropped)"})
			return goja.Undefined()
		case c.logs > limit:
			return goja.Undefined()
		}
		parts := make([]string, len(fc.Arguments))
		for i, a := range fc.Arguments {
			parts[i] = c.format(a)
		}
		msg := truncate(prefix+strings.Join(parts, " "), c.t.spec.MaxLogBytes)
		c.out.emit(&emitFrame{Type: string(sse.TypeToolLog), Message: msg})
		return goja.Undefined()
	}
}

// setLabel is ctx.setLabel(running, completed?): it changes the labels of the call's card.
func (c *callCtx) setLabel(fc goja.FunctionCall) goja.Value {
	f := &emitFrame{Type: string(sse.TypeToolLabelUpdate)}
	if a := fc.Argument(0); !goja.IsUndefined(a) && !goja.IsNull(a) {
		f.RunningLabel = truncate(a.String(), DefaultMaxLabelBytes)
	}
	if a := fc.Argument(1); !goja.IsUndefined(a) && !goja.IsNull(a) {
		f.CompletedLabel = truncate(a.String(), DefaultMaxLabelBytes)
	}
	c.out.emit(f)
	return goja.Undefined()
}

// widget is ctx.widget(type, data): it streams a widget frame {widget_type, data} to the
// client at once. type is a non-empty string of at most DefaultMaxLabelBytes; data any JSON
// value, whose JSON is bounded as a result is (MaxResultBytes).
func (c *callCtx) widget(fc goja.FunctionCall) goja.Value {
	const what = "ctx.widget:"
	typ, ok := fc.Argument(0).Export().(string)
	switch {
	case !ok:
		c.throw(what, "type must be a string, such as \"chart\"")
	case strings.TrimSpace(typ) == "":
		c.throw(what, "type must not be empty")
	case len(typ) > DefaultMaxLabelBytes:
		c.throw(what, fmt.Sprintf("type is %d bytes, over the limit of %d", len(typ), DefaultMaxLabelBytes))
	}
	data := fc.Argument(1)
	if goja.IsUndefined(data) {
		c.throw(what, "data is required: any JSON value")
	}
	s, err := jsonStringify(c.vm, data)
	switch {
	case err != nil:
		c.throw(what, "data is not JSON-serialisable: "+err.Error())
	case s == "":
		c.throw(what, "data is not JSON-serialisable: a function or a symbol has no JSON")
	case len(s) > c.t.spec.MaxResultBytes:
		c.throw(what, fmt.Sprintf("data is %d bytes of JSON, over the limit of %d", len(s), c.t.spec.MaxResultBytes))
	}
	c.out.emit(&emitFrame{Type: string(sse.TypeWidget), WidgetType: typ, Data: json.RawMessage(s)})
	return goja.Undefined()
}

// attachments is the getter of ctx.attachments: the files of the turn's message, each
// {filename, mimeType, delivery, size, data (base64)} and text (the content) for a text type,
// fetched from the host when first read.
func (c *callCtx) attachments(goja.FunctionCall) goja.Value {
	if c.files == nil {
		reply := c.out.rpc(message{Method: rpcFiles})
		if reply.Error != "" {
			c.throw("ctx.attachments", reply.Error)
		}
		c.files = c.parse(reply.Value)
	}
	return c.files
}

// callTool is ctx.callTool(name, input): it runs a tool the handler declares in uses.tools and
// returns its result (parsed JSON, or text); a failed call throws. An inline handler cannot call
// the connection request tool nor a tool that asks the user first: it cannot wait for them (spec
// 4.7 rules 1 and 4).
func (c *callCtx) callTool(fc goja.FunctionCall) goja.Value {
	name := fc.Argument(0).String()
	what := "ctx.callTool(" + quote(name) + ")"
	if !slices.Contains(c.t.spec.UsesTools, name) {
		c.throw(what, "is not allowed: "+name+" is not in uses.tools of "+c.t.spec.Tool)
	}
	if name == "request" && !c.durable {
		c.throw(what, "is not allowed: an inline tool cannot call connections, whose calls may ask the user first")
	}
	var key string
	if c.durable { // a completed call returns its record (spec 4.7 rule 5)
		key = c.key("tool", name)
		if raw, ok := c.recorded(key); ok {
			return c.parse(raw)
		}
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
	raw := c.ask(what, message{Method: rpcCallTool, Name: name, Args: json.RawMessage(args)})
	if c.durable {
		c.out.record(key, raw)
	}
	return c.parse(raw)
}

// ask sends m to the host and returns the reply's value; a reply with an error throws it (after
// what), or stops the execution.
func (c *callCtx) ask(what string, m message) json.RawMessage {
	reply := c.out.rpc(m)
	if reply.Stop {
		c.stop(errors.New(reply.Error))
	}
	if reply.Error != "" {
		c.throw(what, reply.Error)
	}
	return reply.Value
}

// callSubagent is ctx.callSubagent(name, task, input?): it runs a specialist of uses.subagents
// on task and returns its answer; a hard failure throws (spec 4.7 rules 1 and 2).
func (c *callCtx) callSubagent(fc goja.FunctionCall) goja.Value {
	name := fc.Argument(0).String()
	what := "ctx.callSubagent(" + quote(name) + ")"
	if !slices.Contains(c.t.spec.UsesAgents, name) {
		c.throw(what, "is not allowed: "+name+" is not in uses.subagents of "+c.t.spec.Tool)
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
	if c.t.spec.Depth+1 > c.t.spec.MaxDepth {
		c.throw(what, fmt.Sprintf("would nest deeper than the limit of %d (SVC_COMPOSITE_MAX_DEPTH)", c.t.spec.MaxDepth))
	}
	files, err := c.subagentFiles(fc.Argument(3))
	if err != nil {
		c.throw(what, err.Error())
	}
	var key string
	if c.durable {
		key = c.key("agent", name)
		if raw, ok := c.recorded(key); ok {
			return c.parse(raw)
		}
	}
	raw := c.ask(what, message{Method: rpcCallSubagent, Name: name, Task: task.String(), Args: input, Files: files})
	if c.durable {
		c.out.record(key, raw)
	}
	return c.parse(raw)
}

// subagentFiles reads opts.attachments of ctx.callSubagent: files of the turn (ctx.attachments),
// named by filename or given as the objects ctx.attachments holds.
func (c *callCtx) subagentFiles(opts goja.Value) ([]string, error) {
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
	var out []string
	for i, it := range items {
		name, _ := it.(string)
		if m, ok := it.(map[string]any); ok {
			name, _ = m["filename"].(string)
		}
		found := false
		for _, f := range c.t.spec.Files {
			if f.Filename == name {
				out, found = append(out, name), true
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
	case c.t.spec.Layout == agent.LayoutToolTS && (name == "callTool" || name == "callSubagent"):
		why = "not bound for a tool.ts tool"
	case slices.Contains(durableOnly, name):
		why = `only available in a durable tool ("execution": "durable" in tool.json)`
	}
	return func(goja.FunctionCall) goja.Value {
		panic(c.vm.NewGoError(&notAvailableError{"ctx." + name, why}))
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
