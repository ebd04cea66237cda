package handlers

import (
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

func (r rejection) Error() string { return "promise rejected" }

// callError describes an error of a call for the host: an interruption (the host knows why),
// what the handler threw, or the call's own error.
func (e *engine) callError(vm *goja.Runtime, err error) *wireError {
	var interrupted *goja.InterruptedError
	var overflow *goja.StackOverflowError
	var exc *goja.Exception
	var rej rejection
	switch {
	case errors.Is(err, tools.ErrBadArguments):
		return &wireError{Kind: errBadArgs, Message: err.Error()}
	case errors.Is(err, ErrResultTooBig):
		return &wireError{Kind: errTooBig, Message: err.Error()}
	case errors.Is(err, ErrNotSettled):
		return &wireError{Kind: errNotSettled, Message: err.Error()}
	case errors.As(err, &interrupted):
		return &wireError{Kind: errInterrupted, Message: "interrupted"}
	case errors.As(err, &overflow):
		t := &Error{Tool: e.spec.Tool, Message: fmt.Sprintf("RangeError: call stack over %d frames", maxCallStackSize)}
		e.locateFrames(t, overflow.Stack())
		return threw(t)
	case errors.As(err, &exc):
		t := e.describe(vm, exc.Value())
		if t.Line == 0 {
			e.locateFrames(t, exc.Stack())
		}
		return threw(t)
	case errors.As(err, &rej):
		return threw(e.describe(vm, rej.reason))
	}
	return &wireError{Kind: errOther, Message: err.Error()}
}

func threw(t *Error) *wireError {
	return &wireError{Kind: errThrew, Message: t.Message, Tool: t.Tool, File: t.File, Line: t.Line, Column: t.Column}
}

// describe builds the *Error of a thrown value: its message, and its place in the handler's
// source from the error's stack when it has one. A value that cannot be turned into text (an
// object whose toString is not a function, a getter that throws) is described in words of
// ours, never with what the engine says of its insides.
func (e *engine) describe(vm *goja.Runtime, thrown goja.Value) *Error {
	t := &Error{Tool: e.spec.Tool, Message: "undefined"}
	if thrown == nil {
		return t
	}
	o, isObject := thrown.(*goja.Object)
	msg, ok := safeString(thrown)
	if !ok {
		msg = "a thrown value that cannot be shown as text"
	}
	t.Message = msg
	if isObject {
		if m, ok := property(o, "message"); ok && !goja.IsUndefined(m) {
			if s, ok := safeString(m); ok {
				t.Message = s
				if name, ok := property(o, "name"); ok && !goja.IsUndefined(name) {
					if n, ok := safeString(name); ok && n != "Error" && n != "GoError" {
						t.Message = n + ": " + t.Message
					}
				}
			}
		} else if s, err := safeJSON(vm, thrown); err == nil && s != "" {
			t.Message = s
		}
		if stack, ok := property(o, "stack"); ok && !goja.IsUndefined(stack) {
			if s, ok := safeString(stack); ok {
				t.File, t.Line, t.Column = e.locate(s)
			}
		}
	}
	t.Message = truncate(t.Message, e.spec.MaxLogBytes)
	return t
}

// safeString is v as text, false when converting it throws.
func safeString(v goja.Value) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			s, ok = "", false
		}
	}()
	return v.String(), true
}

// property is o[name], false when reading it throws.
func property(o *goja.Object, name string) (v goja.Value, ok bool) {
	defer func() {
		if recover() != nil {
			v, ok = nil, false
		}
	}()
	v = o.Get(name)
	return v, v != nil
}

// safeJSON is JSON.stringify(v), an error when it throws.
func safeJSON(vm *goja.Runtime, v goja.Value) (s string, err error) {
	defer func() {
		if recover() != nil {
			s, err = "", errors.New("cannot be stringified")
		}
	}()
	return jsonStringify(vm, v)
}

// locate finds the first place in the handler's source named in a JavaScript stack trace
// ("at f (svc/tools/x/handler.ts:6:10(11))"); goja maps the positions through the inline source
// map of the compiled JavaScript.
func (e *engine) locate(stack string) (file string, line, col int) {
	re := regexp.MustCompile(regexp.QuoteMeta(e.spec.SourcePath) + `:(\d+):(\d+)`)
	m := re.FindStringSubmatch(stack)
	if m == nil {
		return "", 0, 0
	}
	line, _ = strconv.Atoi(m[1]) // digits only: cannot fail but for overflow, which gives 0
	col, _ = strconv.Atoi(m[2])
	return e.spec.SourcePath, line, col
}

// locateFrames sets t's place to the innermost frame of stack in the handler's source.
func (e *engine) locateFrames(t *Error, stack []goja.StackFrame) {
	for _, f := range stack {
		if p := f.Position(); p.Filename == e.spec.SourcePath && p.Line > 0 {
			t.File, t.Line, t.Column = p.Filename, p.Line, p.Column
			return
		}
	}
}

// result turns the handler's value into the call's result (see Tool.Call).
func (e *engine) result(vm *goja.Runtime, v goja.Value) (tools.Result, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return tools.Result{}, nil
	}
	if s, ok := v.Export().(string); ok {
		if err := e.checkSize(len(s)); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Content: s}, nil
	}
	s, err := jsonStringify(vm, v)
	if err != nil {
		var interrupted *goja.InterruptedError
		if errors.As(err, &interrupted) {
			return tools.Result{}, err // the host names the deadline
		}
		msg := "its toJSON threw"
		var exc *goja.Exception
		if errors.As(err, &exc) {
			if m, ok := safeString(exc.Value()); ok {
				msg = m
			}
		}
		return tools.Result{}, fmt.Errorf("handler %s returned a value that is not JSON: %s", e.spec.Tool, msg)
	}
	if err := e.checkSize(len(s)); err != nil {
		return tools.Result{}, err
	}
	res := tools.Result{Content: s}
	if _, isObject := v.(*goja.Object); isObject && s != "" {
		res.Data = json.RawMessage(s)
	}
	return res, nil
}

func (e *engine) checkSize(n int) error {
	if n > e.spec.MaxResultBytes {
		return fmt.Errorf("handler %s returned %d bytes, over the limit of %d: %w", e.spec.Tool, n, e.spec.MaxResultBytes, ErrResultTooBig)
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
