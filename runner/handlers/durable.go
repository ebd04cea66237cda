package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"

	"svc/runner/durable"
)

// errParked interrupts a handler that reached a pause without an answer: goja's interrupts
// cannot be caught by the handler's try/catch.
var errParked = errors.New("handlers: parked")

// durableState is the part of a call's state that only durable calls have.
type durableState struct {
	durable     bool
	recordedMap map[string]json.RawMessage // what earlier executions recorded, by key
	parked      *durable.Pause             // set when the handler parks
	occur       map[string]int             // occurrences of each kind:name so far, for keys
	stopping    bool                       // parked, or stopped by the host
	files       goja.Value                 // ctx.attachments, once read
}

// key is the journal key of the next occurrence of kind:name.
func (c *callCtx) key(kind, name string) string {
	if c.occur == nil {
		c.occur = map[string]int{}
	}
	base := kind
	if name != "" {
		base += ":" + name
	}
	c.occur[base]++
	return base + "#" + strconv.Itoa(c.occur[base])
}

// recorded returns the recorded value of key, if any.
func (c *callCtx) recorded(key string) (json.RawMessage, bool) {
	v, ok := c.recordedMap[key]
	return v, ok
}

// stop ends the execution with err: an interrupt, which the handler cannot catch. The host
// knows why; the worker only reports that the call stopped.
func (c *callCtx) stop(err error) {
	c.stopping = true
	c.vm.Interrupt(err)
	panic(c.vm.NewGoError(err)) // unwinds this native call; the interrupt ends the rest
}

// park ends the execution at pause p.
func (c *callCtx) park(p *durable.Pause) goja.Value {
	c.parked = p
	c.stopping = true
	c.vm.Interrupt(errParked)
	return goja.Undefined()
}

// clock is the host's clock (the journal's).
func (c *callCtx) clock() time.Time {
	raw := c.ask("ctx.now", message{Method: rpcNow})
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		c.throw("ctx.now", "failed: the host's clock is not a time")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		c.throw("ctx.now", "failed: the host's clock is not a time")
	}
	return t
}

// parse returns the JavaScript value of recorded JSON.
func (c *callCtx) parse(raw json.RawMessage) goja.Value {
	v, err := jsonParse(c.vm, string(raw))
	if err != nil {
		panic(err)
	}
	return v
}

// toJSON is the JSON of v; "null" for undefined.
func (c *callCtx) toJSON(v goja.Value) json.RawMessage {
	if v == nil || goja.IsUndefined(v) {
		return json.RawMessage("null")
	}
	s, err := jsonStringify(c.vm, v)
	if err != nil {
		panic(err)
	}
	if s == "" {
		return json.RawMessage("null")
	}
	return json.RawMessage(s)
}

// durableMethods are the ctx methods only durable handlers have.
func (c *callCtx) durableMethods(m map[string]func(goja.FunctionCall) goja.Value) {
	m["now"] = c.now
	m["random"] = c.random
	m["requestInput"] = c.requestInput
	m["waitForApproval"] = c.waitForApproval
	m["sleepUntil"] = c.sleepUntil
	m["__lookup"] = c.lookupStep
	m["__record"] = c.recordStep
}

// bindDurable finishes a durable handler's ctx: ctx.step, and ctx.request and ctx.store, which
// throw when read (spec 4.7 rule 6).
func (c *callCtx) bindDurable(o *goja.Object) {
	c.bindStep(o)
	for _, name := range []string{"request", "store"} {
		get := c.vm.ToValue(func(goja.FunctionCall) goja.Value {
			panic(c.vm.NewGoError(&notAvailableError{"ctx." + name, "not available in a durable tool: reach the outside through the child tools of uses.tools (spec 4.7 rule 6)"}))
		})
		c.must(o.DefineAccessorProperty(name, get, nil, goja.FLAG_FALSE, goja.FLAG_TRUE))
	}
}

// stepPrelude defines ctx.step in JavaScript, so that fn may be async: its result is recorded
// once it settles. __lookup takes the step's key at the call, in call order.
const stepPrelude = `(function (ctx) {
  const lookup = ctx.__lookup, record = ctx.__record;
  delete ctx.__lookup; delete ctx.__record;
  ctx.step = async function step(name, fn) {
    const r = lookup(name, fn);
    if (r.found) return r.value;
    return record(r.key, await fn());
  };
})`

// stepProgram is stepPrelude compiled once, shared by every runtime.
var stepProgram = goja.MustCompile("step.js", stepPrelude, true)

// bindStep runs stepPrelude on ctx.
func (c *callCtx) bindStep(o *goja.Object) {
	v, err := c.vm.RunProgram(stepProgram)
	if err != nil {
		panic(err)
	}
	fn, _ := goja.AssertFunction(v)
	if _, err := fn(goja.Undefined(), o); err != nil {
		panic(err)
	}
}

// lookupStep is the first half of ctx.step(name, fn): {key, found, value}.
func (c *callCtx) lookupStep(fc goja.FunctionCall) goja.Value {
	name := fc.Argument(0)
	if goja.IsUndefined(name) || goja.IsNull(name) || name.String() == "" {
		c.throw("ctx.step", "needs a name: ctx.step(name, fn)")
	}
	if _, ok := goja.AssertFunction(fc.Argument(1)); !ok {
		c.throw("ctx.step("+quote(name.String())+")", "needs a function: ctx.step(name, fn)")
	}
	key := c.key("step", name.String())
	o := c.vm.NewObject()
	c.must(o.Set("key", key))
	raw, found := c.recorded(key)
	c.must(o.Set("found", found))
	if found {
		c.must(o.Set("value", c.parse(raw)))
	}
	return o
}

// recordStep is the second half of ctx.step: it records the step's value and returns it as
// JSON gives it back (dates as ISO strings, class instances as plain objects).
func (c *callCtx) recordStep(fc goja.FunctionCall) goja.Value {
	key := fc.Argument(0).String()
	raw := c.toJSON(fc.Argument(1))
	c.out.record(key, raw)
	return c.parse(raw)
}

// now is ctx.now(): the clock in milliseconds, recorded.
func (c *callCtx) now(goja.FunctionCall) goja.Value {
	return c.recordedValue("now", func() string { return strconv.FormatInt(c.clock().UnixMilli(), 10) })
}

// random is ctx.random(): a number in [0, 1), recorded.
func (c *callCtx) random(goja.FunctionCall) goja.Value {
	return c.recordedValue("random", func() string { return strconv.FormatFloat(rand.Float64(), 'g', -1, 64) })
}

// recordedValue is the next value of kind: its record on replay, else value's JSON, recorded.
func (c *callCtx) recordedValue(kind string, value func() string) goja.Value {
	key := c.key(kind, "")
	if raw, ok := c.recorded(key); ok {
		return c.parse(raw)
	}
	raw := json.RawMessage(value())
	c.out.record(key, raw)
	return c.parse(raw)
}

// Input types of ctx.requestInput.
const (
	InputText   = "text"
	InputChoice = "choice"
	InputYesNo  = "yesno"
)

// inputOptions are the options of ctx.requestInput and ctx.waitForApproval (spec 4.7).
type inputOptions struct {
	Question          string            `json:"question"`
	Context           string            `json:"context"`
	InputType         string            `json:"inputType"`
	Options           []json.RawMessage `json:"options"`
	Payload           json.RawMessage   `json:"payload"`
	AllowEdits        bool              `json:"allowEdits"`
	EligibleAnswerers []string          `json:"eligibleAnswerers"`
	ExcludeAnswerers  []string          `json:"excludeAnswerers"`
	Timeout           json.RawMessage   `json:"timeout"`
	OnTimeout         json.RawMessage   `json:"onTimeout"`
}

// option is one item of requestInput's options.
type option struct {
	Value       json.RawMessage `json:"value"`
	Label       string          `json:"label"`
	Recommended bool            `json:"recommended,omitempty"`
	Sub         json.RawMessage `json:"sub,omitempty"`
}

// requestInput is ctx.requestInput(opts): the recorded answer {value, respondedBy, edits?}, or
// a pause for one.
func (c *callCtx) requestInput(fc goja.FunctionCall) goja.Value {
	const what = "ctx.requestInput"
	key := c.key("input", "")
	if raw, ok := c.recorded(key); ok {
		return c.parse(raw)
	}
	var o inputOptions
	if err := c.decodeOptions(fc.Argument(0), &o); err != nil {
		c.throw(what, err.Error())
	}
	if o.InputType == "" {
		o.InputType = InputText
		if len(o.Options) > 0 {
			o.InputType = InputChoice
		}
	}
	p := &durable.Pause{Kind: durable.PauseInput, Key: key, Question: o.Question, Context: o.Context,
		InputType: o.InputType, Payload: o.Payload, AllowEdits: o.AllowEdits,
		EligibleAnswerers: o.EligibleAnswerers, ExcludeAnswerers: o.ExcludeAnswerers}
	switch o.InputType {
	case InputText, InputYesNo:
	case InputChoice:
		if len(o.Options) == 0 {
			c.throw(what, `options are required for inputType "choice"`)
		}
	default:
		c.throw(what, fmt.Sprintf(`inputType must be "text", "choice" or "yesno", not %q`, o.InputType))
	}
	if len(o.Options) > 0 {
		opts, err := checkOptions(o.Options)
		if err != nil {
			c.throw(what, err.Error())
		}
		p.Options = opts
	}
	if err := c.timeout(p, o); err != nil {
		c.throw(what, err.Error())
	}
	if p.Question == "" {
		c.throw(what, "needs a question")
	}
	return c.park(p)
}

// waitForApproval is ctx.waitForApproval(prompt): the recorded answer {approved, respondedBy?,
// note?}, or a pause for one. prompt is the question, or an object with the options of
// requestInput but inputType and options.
func (c *callCtx) waitForApproval(fc goja.FunctionCall) goja.Value {
	const what = "ctx.waitForApproval"
	key := c.key("approval", "")
	if raw, ok := c.recorded(key); ok {
		return c.parse(raw)
	}
	var o inputOptions
	arg := fc.Argument(0)
	if s, ok := arg.Export().(string); ok {
		o.Question = s
	} else if err := c.decodeOptions(arg, &o); err != nil {
		c.throw(what, err.Error())
	}
	if o.InputType != "" || len(o.Options) > 0 {
		c.throw(what, "is a yes/no question: it takes no inputType or options (use ctx.requestInput)")
	}
	if o.Question == "" {
		c.throw(what, "needs a prompt: ctx.waitForApproval(\"Refund 900 EUR?\")")
	}
	p := &durable.Pause{Kind: durable.PauseApproval, Key: key, Question: o.Question, Context: o.Context,
		InputType: InputYesNo, Payload: o.Payload, AllowEdits: o.AllowEdits,
		EligibleAnswerers: o.EligibleAnswerers, ExcludeAnswerers: o.ExcludeAnswerers}
	if err := c.timeout(p, o); err != nil {
		c.throw(what, err.Error())
	}
	return c.park(p)
}

// sleepUntil is ctx.sleepUntil(when): at once when the time has passed (or the wake-up is
// recorded), else a pause until when. when is a Date, milliseconds since the epoch or an ISO
// 8601 string.
func (c *callCtx) sleepUntil(fc goja.FunctionCall) goja.Value {
	const what = "ctx.sleepUntil"
	key := c.key("sleep", "")
	if _, ok := c.recorded(key); ok {
		return goja.Undefined()
	}
	when, err := c.instant(fc.Argument(0))
	if err != nil {
		c.throw(what, err.Error())
	}
	if !when.After(c.clock()) {
		return goja.Undefined()
	}
	when = when.UTC()
	return c.park(&durable.Pause{Kind: durable.PauseSleep, Key: key, WakeAt: &when})
}

// instant reads a Date, a number of milliseconds or an ISO 8601 string.
func (c *callCtx) instant(v goja.Value) (time.Time, error) {
	if goja.IsUndefined(v) || goja.IsNull(v) {
		return time.Time{}, errors.New("needs a time: a Date, milliseconds since 1970 or an ISO 8601 string")
	}
	switch x := v.Export().(type) {
	case time.Time:
		return x, nil
	case int64:
		return time.UnixMilli(x), nil
	case float64:
		return time.UnixMilli(int64(x)), nil
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not an ISO 8601 time such as 2026-12-01T09:00:00Z", x)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("cannot read %s as a time: give a Date, milliseconds or an ISO 8601 string", v.String())
}

// decodeOptions reads an options object into o, refusing unknown fields by name.
func (c *callCtx) decodeOptions(v goja.Value, o *inputOptions) error {
	if _, ok := v.(*goja.Object); !ok {
		return errors.New("needs an options object such as {question, inputType, options}")
	}
	raw := c.toJSON(v)
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(o); err != nil {
		return fmt.Errorf("options: %v", strings.TrimPrefix(err.Error(), "json: ")) //nolint:errorlint // described for the handler
	}
	for i, a := range o.EligibleAnswerers {
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("eligibleAnswerers[%d] is empty", i)
		}
	}
	return nil
}

// checkOptions checks every option has a value and a label and returns the list as JSON.
func checkOptions(opts []json.RawMessage) (json.RawMessage, error) {
	out := make([]option, 0, len(opts))
	for i, raw := range opts {
		var o option
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("options[%d]: %v", i, strings.TrimPrefix(err.Error(), "json: ")) //nolint:errorlint // described for the handler
		}
		if len(o.Value) == 0 || string(o.Value) == "null" {
			return nil, fmt.Errorf("options[%d] needs a value", i)
		}
		if o.Label == "" {
			return nil, fmt.Errorf("options[%d] needs a label", i)
		}
		for _, prev := range out {
			if string(prev.Value) == string(o.Value) {
				return nil, fmt.Errorf("options[%d]: value %s is given twice", i, o.Value)
			}
		}
		out = append(out, o)
	}
	return json.Marshal(out)
}

// Timeout actions of requestInput and waitForApproval.
const (
	TimeoutDeny     = "deny"
	TimeoutDefault  = "default"
	TimeoutEscalate = "escalate"
)

// OnTimeout is what happens to an input or approval that nobody answered in time.
type OnTimeout struct {
	Action string          `json:"action"`          // deny, default or escalate
	Value  json.RawMessage `json:"value,omitempty"` // the answer of default
	To     []string        `json:"to,omitempty"`    // the answerers of escalate
	// TimeoutMS is how long the escalated question waits in turn (0: the first timeout again).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// timeout reads timeout and onTimeout into p: timeout is milliseconds or a duration such as
// "30m" or "48h"; onTimeout is "deny" (the default), {default: value} or {escalate: [users],
// timeout?}.
func (c *callCtx) timeout(p *durable.Pause, o inputOptions) error {
	if len(o.Timeout) == 0 || string(o.Timeout) == "null" {
		if len(o.OnTimeout) > 0 {
			return errors.New("onTimeout needs a timeout")
		}
		return nil
	}
	d, err := duration(o.Timeout)
	if err != nil {
		return fmt.Errorf("timeout: %w", err)
	}
	at := c.clock().Add(d).UTC()
	p.ExpiresAt = &at
	ot := OnTimeout{Action: TimeoutDeny}
	if len(o.OnTimeout) > 0 && string(o.OnTimeout) != "null" {
		var s string
		if json.Unmarshal(o.OnTimeout, &s) == nil {
			if s != TimeoutDeny {
				return fmt.Errorf(`onTimeout must be "deny", {default: value} or {escalate: [answerers]}, not %q`, s)
			}
		} else {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(o.OnTimeout, &m); err != nil {
				return errors.New(`onTimeout must be "deny", {default: value} or {escalate: [answerers]}`)
			}
			switch {
			case m["default"] != nil:
				ot = OnTimeout{Action: TimeoutDefault, Value: m["default"]}
			case m["escalate"] != nil:
				ot = OnTimeout{Action: TimeoutEscalate}
				if err := json.Unmarshal(m["escalate"], &ot.To); err != nil || len(ot.To) == 0 || slices.Contains(ot.To, "") {
					return errors.New("onTimeout.escalate must be a non-empty list of answerers")
				}
				if t := m["timeout"]; t != nil {
					d, err := duration(t)
					if err != nil {
						return fmt.Errorf("onTimeout.timeout: %w", err)
					}
					ot.TimeoutMS = d.Milliseconds()
				}
			default:
				return errors.New(`onTimeout must be "deny", {default: value} or {escalate: [answerers]}`)
			}
		}
	}
	p.OnTimeout, _ = json.Marshal(ot) // plain fields: cannot fail
	return nil
}

// duration reads milliseconds or a Go duration string of at least a second.
func duration(raw json.RawMessage) (time.Duration, error) {
	var d time.Duration
	var ms float64
	var s string
	switch {
	case json.Unmarshal(raw, &ms) == nil:
		d = time.Duration(ms * float64(time.Millisecond))
	case json.Unmarshal(raw, &s) == nil:
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration such as \"30m\" or \"48h\"", s)
		}
	default:
		return 0, errors.New("must be milliseconds or a duration such as \"30m\"")
	}
	if d < time.Second {
		return 0, fmt.Errorf("%s is shorter than a second", d)
	}
	return d, nil
}
