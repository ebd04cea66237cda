package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/dop251/goja"

	"svc/runner/tools"
)

// Error is the error of a call whose handler threw, or whose promise rejected. The loop gives its
// message to the model as an error result.
type Error struct {
	Tool    string // tool name
	Message string // the thrown error's message ("TypeError: ..." for errors other than Error)
	File    string // the handler's source path, when the throw is located in it
	Line    int    // 1-based line in File; 0 when unknown
	Column  int    // 1-based column in File; 0 when unknown
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("handler %s threw at %s:%d: %s", e.Tool, e.File, e.Line, e.Message)
	}
	return fmt.Sprintf("handler %s threw: %s", e.Tool, e.Message)
}

// rejection is the reason of a rejected promise, as an error until callError describes it.
type rejection struct{ reason goja.Value }

func (r rejection) Error() string { return "promise rejected: " + r.reason.String() }

// callError turns an error of a call into the call's error: the deadline or cancellation that
// interrupted it, or an *Error for what the handler threw.
func (t *Tool) callError(ctx context.Context, vm *goja.Runtime, err error) error {
	if errors.Is(err, tools.ErrBadArguments) {
		return err
	}
	var interrupted *goja.InterruptedError
	if errors.As(err, &interrupted) {
		cause := context.Cause(ctx)
		if errors.Is(cause, ErrDeadline) {
			return fmt.Errorf("handler %s ran past its %s deadline: %w", t.def.Name, t.opts.Timeout, ErrDeadline)
		}
		return fmt.Errorf("handler %s stopped: %w", t.def.Name, cause)
	}
	var overflow *goja.StackOverflowError
	if errors.As(err, &overflow) {
		e := &Error{Tool: t.def.Name, Message: fmt.Sprintf("RangeError: call stack over %d frames", maxCallStackSize)}
		t.locateFrames(e, overflow.Stack())
		return e
	}
	var exc *goja.Exception
	if errors.As(err, &exc) {
		e := t.describe(vm, exc.Value())
		if e.Line == 0 {
			t.locateFrames(e, exc.Stack())
		}
		return e
	}
	var rej rejection
	if errors.As(err, &rej) {
		return t.describe(vm, rej.reason)
	}
	return err
}

// describe builds the *Error of a thrown value: its message, and its place in the handler's source
// from the error's stack when it has one.
func (t *Tool) describe(vm *goja.Runtime, thrown goja.Value) *Error {
	e := &Error{Tool: t.def.Name, Message: "undefined"}
	if thrown == nil {
		return e
	}
	e.Message = thrown.String()
	o, ok := thrown.(*goja.Object)
	if !ok {
		return e
	}
	if msg := o.Get("message"); msg != nil && !goja.IsUndefined(msg) {
		e.Message = msg.String()
		if name := o.Get("name"); name != nil && !goja.IsUndefined(name) {
			if n := name.String(); n != "Error" && n != "GoError" {
				e.Message = n + ": " + e.Message
			}
		}
	} else if s, err := jsonStringify(vm, thrown); err == nil && s != "" {
		e.Message = s
	}
	e.Message = truncate(e.Message, t.opts.MaxLogBytes)
	if stack := o.Get("stack"); stack != nil && !goja.IsUndefined(stack) {
		e.File, e.Line, e.Column = t.locate(stack.String())
	}
	return e
}

// locate finds the first place in the handler's source named in a JavaScript stack trace
// ("at f (svc/tools/x/handler.ts:6:10(11))"); goja maps the positions through the inline source
// map of the compiled JavaScript.
func (t *Tool) locate(stack string) (file string, line, col int) {
	re := regexp.MustCompile(regexp.QuoteMeta(t.def.SourcePath) + `:(\d+):(\d+)`)
	m := re.FindStringSubmatch(stack)
	if m == nil {
		return "", 0, 0
	}
	line, _ = strconv.Atoi(m[1]) // digits only: cannot fail but for overflow, which gives 0
	col, _ = strconv.Atoi(m[2])
	return t.def.SourcePath, line, col
}

// locateFrames sets e's place to the innermost frame of stack in the handler's source.
func (t *Tool) locateFrames(e *Error, stack []goja.StackFrame) {
	for _, f := range stack {
		if p := f.Position(); p.Filename == t.def.SourcePath && p.Line > 0 {
			e.File, e.Line, e.Column = p.Filename, p.Line, p.Column
			return
		}
	}
}

// result turns the handler's value into the call's result (see Call).
func (t *Tool) result(vm *goja.Runtime, v goja.Value) (tools.Result, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return tools.Result{}, nil
	}
	if s, ok := v.Export().(string); ok {
		if err := t.checkSize(len(s)); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Content: s}, nil
	}
	s, err := jsonStringify(vm, v)
	if err != nil {
		var interrupted *goja.InterruptedError
		if errors.As(err, &interrupted) {
			return tools.Result{}, err // callError names the deadline
		}
		return tools.Result{}, fmt.Errorf("handler %s returned a value that is not JSON: %v", t.def.Name, err) //nolint:errorlint // the JavaScript exception is described, not wrapped
	}
	if err := t.checkSize(len(s)); err != nil {
		return tools.Result{}, err
	}
	res := tools.Result{Content: s}
	if _, isObject := v.(*goja.Object); isObject && s != "" {
		res.Data = json.RawMessage(s)
	}
	return res, nil
}

func (t *Tool) checkSize(n int) error {
	if n > t.opts.MaxResultBytes {
		return fmt.Errorf("handler %s returned %d bytes, over the limit of %d: %w", t.def.Name, n, t.opts.MaxResultBytes, ErrResultTooBig)
	}
	return nil
}

// jsonParse is JSON.parse(s) in vm.
func jsonParse(vm *goja.Runtime, s string) (goja.Value, error) {
	return callJSON(vm, "parse", vm.ToValue(s))
}

// jsonStringify is JSON.stringify(v) in vm; "" when v has no JSON (a function, undefined).
func jsonStringify(vm *goja.Runtime, v goja.Value) (string, error) {
	out, err := callJSON(vm, "stringify", v)
	if err != nil || out == nil || goja.IsUndefined(out) {
		return "", err
	}
	return out.String(), nil
}

func callJSON(vm *goja.Runtime, method string, arg goja.Value) (goja.Value, error) {
	fn, ok := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get(method))
	if !ok {
		return nil, fmt.Errorf("JSON.%s is not a function", method)
	}
	return fn(goja.Undefined(), arg)
}
