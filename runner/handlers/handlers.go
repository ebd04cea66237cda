package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"svc/agent"
	"svc/runner/durable"
	"svc/runner/models"
	"svc/runner/sandbox"
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
	// ErrNoSandbox is returned by New without Options.Sandbox: handlers run nowhere else.
	ErrNoSandbox = errors.New("handlers: no sandbox to run handlers in")
	// ErrResultTooBig is wrapped by the error of a call whose result is over Options.MaxResultBytes.
	ErrResultTooBig = errors.New("handlers: result too big")
	// ErrNotSettled is wrapped by the error of a call whose promise never settled.
	ErrNotSettled = errors.New("handlers: promise never settled")
	// ErrMemory is wrapped by the error of a call stopped over the sandbox's memory cap.
	ErrMemory = sandbox.ErrMemory
)

// Options configure a handler tool. Zero values take the defaults above.
type Options struct {
	// Sandbox runs the calls, each in a worker process of its own (package sandbox). Required.
	Sandbox *sandbox.Pool
	// Key is what the sandbox counts this tool's calls under, so that one agent cannot hold
	// every worker: the agent (or deployment) id.
	Key string
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
	// Schemas compiles the parameter schemas of the children, against which every
	// ctx.callTool call is checked before the child runs; the tools of one runtime share one.
	// Default: one of the tool's own.
	Schemas *tools.Schemas
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
	if o.Schemas == nil {
		o.Schemas = &tools.Schemas{}
	}
	return o
}

// Tool is a handler tool: a tools.Tool that runs the default export of the handler's module with
// (input, ctx) for each call, in a sandbox worker. It is safe for concurrent use.
type Tool struct {
	def    *agent.Tool
	digest string // of def.JS: the sandbox compiles each program once
	opts   Options
}

var _ tools.Tool = (*Tool)(nil)

// New returns the tool that runs t's JavaScript (t.JS, built by agent.Load) in opts.Sandbox.
// The JavaScript is compiled there, never in this process: an error in it is the error of
// every call.
func New(t *agent.Tool, opts Options) (*Tool, error) {
	if t == nil || t.JS == "" {
		return nil, ErrNoHandler
	}
	if opts.Sandbox == nil {
		return nil, ErrNoSandbox
	}
	sum := sha256.Sum256([]byte(t.JS))
	return &Tool{def: t, digest: hex.EncodeToString(sum[:]), opts: opts.withDefaults()}, nil
}

// Spec is the tool's name, description and parameters (tool.json).
func (t *Tool) Spec() models.ToolSpec {
	return models.ToolSpec{Name: t.def.Name, Description: t.def.Description, Parameters: t.def.Parameters}
}

// Call runs the handler once, in a fresh JavaScript runtime of a sandbox worker, bounded by
// Options.Timeout and ctx.
//
// A handler that returns (or resolves to) an object or array gives a result whose Data and Content
// are its JSON; a string is the Content; undefined or null an empty result; another value its JSON
// as Content. A handler that throws or rejects gives an *Error (the loop hands its message, with
// the handler.ts line, to the model); a call past its deadline an error wrapping ErrDeadline; a
// call whose ctx ends first an error wrapping ctx's cause; a call over the memory cap an error
// wrapping ErrMemory.
func (t *Tool) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	if t.def.Durable() {
		return tools.Result{}, fmt.Errorf("handler %s is durable: it runs through RunDurable", t.def.Name)
	}
	res, _, err := t.exec(ctx, call, nil)
	return res, err
}

// RunDurable runs one execution of a durable handler (spec 4.7): from the top, with the calls
// recorded in j returning their records. It returns the handler's result when the handler
// finished, or the pause it parked at (Key set, nothing recorded for it), or the error of the
// call as Call does. A Record or Flush error ends the execution with that error: what the
// handler does after it reaches nobody.
func (t *Tool) RunDurable(ctx context.Context, call tools.Call, j *Journal) (tools.Result, *durable.Pause, error) {
	if j == nil {
		j = &Journal{}
	}
	return t.exec(ctx, call, j)
}

// depthKey keys the depth of nested handler calls in a context.
type depthKey struct{}

func depthOf(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}
