package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/dop251/goja"

	"svc/runner/tools"
)

// engine runs one call of a handler in goja, inside a sandbox worker: the compiled program
// and what the host said of the call.
type engine struct {
	spec *callSpec
	prg  *goja.Program
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

// run runs the call in vm, a fresh runtime, until it returns, parks or ctx ends (which
// interrupts it), and describes how it ended.
func (e *engine) run(ctx context.Context, vm *goja.Runtime, out outside) (o *outcome) {
	// Interrupt the runtime when ctx ends; wait for the interrupting goroutine before returning,
	// so that none outlives the call.
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(interrupted)
		vm.Interrupt(context.Cause(ctx))
	})
	defer func() {
		if !stop() {
			<-interrupted
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			o = &outcome{Err: &wireError{Kind: errOther, Message: fmt.Sprintf("handler %s: internal error: %s", e.spec.Tool, panicMessage(p))}}
		}
	}()

	c := newCallCtx(ctx, e, vm, out)
	v, err := caught(func() (goja.Value, error) { return e.invoke(vm, c) })
	if c.stopping { // parked, or stopped by the host: what the handler did after is moot
		if c.parked != nil {
			return &outcome{Pause: c.parked}
		}
		return &outcome{Err: &wireError{Kind: errInterrupted, Message: "stopped"}}
	}
	if err == nil {
		v, err = caught(func() (goja.Value, error) { return e.settle(v) })
	}
	var res tools.Result
	if err == nil {
		res, err = caught(func() (tools.Result, error) { return e.result(vm, v) })
	}
	var werr *wireError
	if err != nil {
		werr = e.callError(vm, err)
	}
	if ctx.Err() != nil { // interrupted while it ended, or while its end was described
		return &outcome{Err: &wireError{Kind: errInterrupted, Message: "interrupted"}}
	}
	if werr != nil {
		return &outcome{Err: werr}
	}
	return &outcome{Content: res.Content, Data: res.Data}
}

// caught runs f and returns an interrupt that f raised as a panic as its error. goja panics
// with the interrupt when it lands in Go code reading a JavaScript value (a getter of the
// result, of the module's exports); as an error it ends the call as any interrupt does: a
// pause, a stop or the deadline, not an internal error. Other panics go on.
func caught[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			ie, ok := p.(*goja.InterruptedError)
			if !ok {
				panic(p)
			}
			err = ie
		}
	}()
	return f()
}

// invoke runs the module and calls its default export with (input, ctx).
func (e *engine) invoke(vm *goja.Runtime, c *callCtx) (goja.Value, error) {
	vm.SetMaxCallStackSize(maxCallStackSize)
	c.bindGlobals()
	wrapper, err := vm.RunProgram(e.prg)
	if err != nil {
		return nil, err
	}
	load, ok := goja.AssertFunction(wrapper)
	if !ok {
		return nil, fmt.Errorf("handler %s: module wrapper is not a function", e.spec.Tool)
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
		return nil, fmt.Errorf("handler %s: the default export is not a function", e.spec.Tool)
	}
	input, err := jsonParse(vm, string(e.spec.Args))
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
func (e *engine) settle(v goja.Value) (goja.Value, error) {
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
		return nil, fmt.Errorf("handler %s: %w (it awaits something nothing resolves)", e.spec.Tool, ErrNotSettled)
	}
}

// panicMessage describes a recovered panic in plain words: never a dump of Go values.
func panicMessage(p any) (msg string) {
	defer func() {
		if recover() != nil {
			msg = "a value that cannot be described"
		}
	}()
	var exc *goja.Exception
	switch x := p.(type) {
	case string:
		return x
	case error:
		if errors.As(x, &exc) {
			return "a thrown value that cannot be described"
		}
		return x.Error()
	}
	return fmt.Sprintf("a value of type %T", p)
}
