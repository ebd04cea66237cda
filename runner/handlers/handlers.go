package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dop251/goja"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/tools"
)

// Defaults of Options.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultMaxResultBytes = 1 << 20 // 1 MiB of result JSON or text
	DefaultMaxLogLines    = 100     // log lines per call
	DefaultMaxLogBytes    = 4 << 10 // bytes per log line
	DefaultMaxLabelBytes  = 200     // bytes per label
	maxCallStackSize      = 1000    // JavaScript frames, against runaway recursion
)

var (
	// ErrDeadline is wrapped by the error of a call that ran past its deadline (Options.Timeout).
	ErrDeadline = errors.New("handlers: deadline passed")
	// ErrNoHandler is returned by New for a tool without compiled JavaScript.
	ErrNoHandler = errors.New("handlers: tool has no compiled handler")
	// ErrResultTooBig is wrapped by the error of a call whose result is over Options.MaxResultBytes.
	ErrResultTooBig = errors.New("handlers: result too big")
	// ErrNotSettled is wrapped by the error of a call whose promise never settled.
	ErrNotSettled = errors.New("handlers: promise never settled")
)

// Options configure a handler tool. Zero values take the defaults above.
type Options struct {
	// Timeout bounds every call (besides the call's ctx). Default DefaultTimeout.
	Timeout time.Duration
	// MaxResultBytes bounds the JSON (or text) of a result. Default DefaultMaxResultBytes.
	MaxResultBytes int
	// MaxLogLines bounds the tool_log frames of one call; further lines are dropped, after one
	// line saying so. Default DefaultMaxLogLines.
	MaxLogLines int
	// MaxLogBytes bounds one log line, and the message of a thrown error; a longer one is cut.
	// Default DefaultMaxLogBytes.
	MaxLogBytes int
	// Cache, when set, shares compiled programs between tools of the same name and JavaScript.
	Cache *Cache
	// Children resolves the tools ctx.callTool may call (those of the tool's uses.tools); nil
	// makes ctx.callTool throw.
	Children func(name string) (tools.Tool, error)
	// Subagent runs the named agent's loop on task (with input, as JSON, when not nil, and the
	// files, which go on the specialist's message) for the call and returns its answer; an
	// error is a hard failure, thrown in the handler. nil makes ctx.callSubagent throw.
	Subagent func(ctx context.Context, name, task string, input json.RawMessage, files []tools.Attachment, call tools.Call) (string, error)
	// MaxDepth bounds how deeply handlers call handlers through ctx.callTool. Default
	// DefaultMaxDepth.
	MaxDepth int
	// MaxCalls bounds the ctx.callTool calls of one turn (counted in tools.Session.Calls).
	// Default DefaultMaxCalls.
	MaxCalls int
}

// Bounds of composition.
const (
	DefaultMaxDepth = 4
	DefaultMaxCalls = 100
)

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.MaxLogLines <= 0 {
		o.MaxLogLines = DefaultMaxLogLines
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = DefaultMaxLogBytes
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	return o
}

// Tool is a handler tool: a tools.Tool that runs the default export of the handler's module with
// (input, ctx) for each call. It is safe for concurrent use.
type Tool struct {
	def  *agent.Tool
	prg  *goja.Program
	opts Options
}

var _ tools.Tool = (*Tool)(nil)

// New compiles t's JavaScript (t.JS, built by agent.Load) and returns the tool that runs it. The
// error reports a tool without JavaScript or JavaScript goja cannot compile.
func New(t *agent.Tool, opts Options) (*Tool, error) {
	if t == nil || t.JS == "" {
		return nil, ErrNoHandler
	}
	opts = opts.withDefaults()
	var prg *goja.Program
	var err error
	if opts.Cache != nil {
		prg, err = opts.Cache.program(t.Name, t.JS)
	} else {
		prg, err = compile(t.Name, t.JS)
	}
	if err != nil {
		return nil, err
	}
	return &Tool{def: t, prg: prg, opts: opts}, nil
}

// moduleWrapper turns the CommonJS module into a function of (exports, require, module). The
// prefix stays on the first line and the suffix on its own line after the source map comment, so
// that goja still finds the inline map and generated line numbers do not move.
const (
	moduleWrapperPrefix = "(function (exports, require, module) {"
	moduleWrapperSuffix = "\n})"
)

// compile compiles the JavaScript of tool name. The program is named "<name>.js", in no folder, so
// that goja resolves the source map's "svc/tools/<name>/handler.ts" to itself in stack traces.
func compile(name, js string) (*goja.Program, error) {
	prg, err := goja.Compile(name+".js", moduleWrapperPrefix+js+moduleWrapperSuffix, true)
	if err != nil {
		return nil, fmt.Errorf("compile handler %s: %w", name, err)
	}
	return prg, nil
}

// Spec is the tool's name, description and parameters (tool.json).
func (t *Tool) Spec() models.ToolSpec {
	return models.ToolSpec{Name: t.def.Name, Description: t.def.Description, Parameters: t.def.Parameters}
}

// Call runs the handler once, in a fresh runtime, bounded by Options.Timeout and ctx.
//
// A handler that returns (or resolves to) an object or array gives a result whose Data and Content
// are its JSON; a string is the Content; undefined or null an empty result; another value its JSON
// as Content. A handler that throws or rejects gives an *Error (the loop hands its message, with
// the handler.ts line, to the model); a call past its deadline an error wrapping ErrDeadline; a
// call whose ctx ends first an error wrapping ctx's cause.
func (t *Tool) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	if t.def.Durable() {
		return tools.Result{}, fmt.Errorf("handler %s is durable: it runs through RunDurable", t.def.Name)
	}
	return t.run(ctx, goja.New(), call)
}

// run runs one call in vm and leaves no interrupt pending on it, so that it could be reused (the
// pooled benchmark does).
func (t *Tool) run(ctx context.Context, vm *goja.Runtime, call tools.Call) (res tools.Result, err error) {
	return t.runWith(ctx, vm, call, nil)
}

// runWith is run with setup applied to the call's state before the handler starts.
func (t *Tool) runWith(ctx context.Context, vm *goja.Runtime, call tools.Call, setup func(*callCtx)) (res tools.Result, err error) {
	if err := context.Cause(ctx); err != nil {
		return tools.Result{}, fmt.Errorf("handler %s not started: %w", t.def.Name, err)
	}
	depth := depthOf(ctx) + 1
	if depth > t.opts.MaxDepth {
		return tools.Result{}, fmt.Errorf("handler %s: tools calling tools nest %d deep, over the limit of %d (SVC_COMPOSITE_MAX_DEPTH)", t.def.Name, depth, t.opts.MaxDepth)
	}
	ctx = context.WithValue(ctx, depthKey{}, depth)
	ctx, cancel := context.WithTimeoutCause(ctx, t.opts.Timeout, ErrDeadline)
	defer cancel()

	// Interrupt the runtime when ctx ends; wait for the interrupting goroutine before returning, so
	// that none outlives the call and a reused runtime is not interrupted later.
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(interrupted)
		vm.Interrupt(context.Cause(ctx))
	})
	defer func() {
		if !stop() {
			<-interrupted
			vm.ClearInterrupt()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			res, err = tools.Result{}, fmt.Errorf("handler %s: internal error: %v", t.def.Name, p)
		}
	}()

	c := newCallCtx(ctx, t, vm, call)
	if setup != nil {
		setup(c)
	}
	v, err := t.invoke(vm, c, call)
	if c.stopping { // parked, or a journal write failed: what the handler did after is moot
		return tools.Result{}, c.stopErr
	}
	if err == nil {
		v, err = t.settle(v)
	}
	if err != nil {
		return tools.Result{}, t.callError(ctx, vm, err)
	}
	res, err = t.result(vm, v)
	if err != nil {
		return tools.Result{}, t.callError(ctx, vm, err)
	}
	return res, nil
}

// invoke runs the module and calls its default export with (input, ctx).
func (t *Tool) invoke(vm *goja.Runtime, c *callCtx, call tools.Call) (goja.Value, error) {
	vm.SetMaxCallStackSize(maxCallStackSize)
	c.bindGlobals()
	wrapper, err := vm.RunProgram(t.prg)
	if err != nil {
		return nil, err
	}
	load, ok := goja.AssertFunction(wrapper)
	if !ok {
		return nil, fmt.Errorf("handler %s: module wrapper is not a function", t.def.Name)
	}
	exports := vm.NewObject()
	module := vm.NewObject()
	if err := module.Set("exports", exports); err != nil {
		return nil, err
	}
	if _, err := load(goja.Undefined(), exports, vm.ToValue(c.require), module); err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(defaultExport(vm, module.Get("exports")))
	if !ok {
		return nil, fmt.Errorf("handler %s: the default export is not a function", t.def.Name)
	}
	args := string(call.Arguments)
	if args == "" {
		args = "{}"
	}
	input, err := jsonParse(vm, args)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments are not JSON: %v", tools.ErrBadArguments, err) //nolint:errorlint // describe the JavaScript exception only
	}
	return fn(goja.Undefined(), input, c.object())
}

// defaultExport is module.exports.default, or module.exports itself when it is a function.
func defaultExport(vm *goja.Runtime, exports goja.Value) goja.Value {
	if exports == nil || goja.IsUndefined(exports) || goja.IsNull(exports) {
		return goja.Undefined()
	}
	if _, ok := goja.AssertFunction(exports); ok {
		return exports
	}
	return exports.ToObject(vm).Get("default")
}

// settle returns the value a promise v settled to. goja runs the promise jobs when the call
// returns, and nothing else can resolve them later, so a pending promise never settles.
func (t *Tool) settle(v goja.Value) (goja.Value, error) {
	p, ok := v.Export().(*goja.Promise)
	if !ok {
		return v, nil
	}
	switch p.State() {
	case goja.PromiseStateFulfilled:
		return p.Result(), nil
	case goja.PromiseStateRejected:
		return nil, rejection{p.Result()}
	default:
		return nil, fmt.Errorf("handler %s: %w (it awaits something nothing resolves)", t.def.Name, ErrNotSettled)
	}
}

// Cache shares compiled programs by tool name and JavaScript digest. It is safe for concurrent
// use. It keeps every program it compiled: make one per runtime (one agent version).
type Cache struct {
	mu   sync.Mutex
	prgs map[cacheKey]*goja.Program
}

type cacheKey struct {
	name   string
	digest [sha256.Size]byte
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{prgs: map[cacheKey]*goja.Program{}} }

func (c *Cache) program(name, js string) (*goja.Program, error) {
	key := cacheKey{name, sha256.Sum256([]byte(js))}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prg, ok := c.prgs[key]; ok {
		return prg, nil
	}
	prg, err := compile(name, js)
	if err != nil {
		return nil, err
	}
	c.prgs[key] = prg
	return prg, nil
}
