package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"svc/agent/toolschema"
	"svc/runner/models"
)

// schema is the compiled parameter schema of one tool, or why it did not compile.
type schema struct {
	s   *toolschema.Schema
	err error
}

// Schemas compiles parameter schemas once for all the sets built with it (Schemas.NewSet): the
// tool sets of one runtime's profiles share one, so that a tool offered to several named
// agents is compiled once. The zero value is ready; it is safe for concurrent use and only grows.
type Schemas struct {
	mu sync.Mutex
	m  map[string]*schema // by the schema's text
}

// compile returns the compiled schema of raw.
func (c *Schemas) compile(raw json.RawMessage) *schema {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc := c.m[string(raw)]; sc != nil {
		return sc
	}
	sc := &schema{}
	sc.s, sc.err = toolschema.Compile(raw)
	if c.m == nil {
		c.m = map[string]*schema{}
	}
	c.m[string(raw)] = sc
	return sc
}

// ArgumentsError is a call refused before its tool ran because its arguments do not match the
// tool's parameter schema (the one offered to the model). It wraps ErrBadArguments and the
// *toolschema.Error whose Problems name each field.
type ArgumentsError struct {
	Tool string
	Err  *toolschema.Error
}

// Error is "invalid arguments for triage: subject: required".
func (e *ArgumentsError) Error() string {
	return "invalid arguments for " + e.Tool + ": " + e.Err.Error()
}

// Unwrap returns ErrBadArguments and the schema's error.
func (e *ArgumentsError) Unwrap() []error { return []error{ErrBadArguments, e.Err} }

// ErrBadSchema is wrapped by the error of Check for a tool whose parameter schema does not
// compile: such a tool cannot be called (the build refuses such a tool.json; for a built-in it
// is a bug).
var ErrBadSchema = errors.New("tools: parameter schema does not compile")

// Check validates the arguments of a call of the tool called name against its parameter
// schema: nil when they match (or when the set has no such tool), an *ArgumentsError naming
// each field that does not, or an error wrapping ErrBadSchema when the tool's schema does not
// compile. It runs nothing.
func (s *Set) Check(name string, args json.RawMessage) error {
	if s == nil {
		return nil
	}
	sc := s.schemas[name]
	if sc == nil {
		return nil
	}
	return sc.check(name, args)
}

// Check is Set.Check for a tool that is in no set (a child a handler calls through
// ctx.callTool): its schema, spec.Parameters, is compiled once in c.
func (c *Schemas) Check(spec models.ToolSpec, args json.RawMessage) error {
	return c.compile(spec.Parameters).check(spec.Name, args)
}

func (sc *schema) check(name string, args json.RawMessage) error {
	if sc.err != nil {
		return fmt.Errorf("%w: tool %s cannot be called: its parameters: %v", ErrBadSchema, name, sc.err)
	}
	err := sc.s.Check(args)
	if err == nil {
		return nil
	}
	var se *toolschema.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("%w: %s: %v", ErrBadArguments, name, err)
	}
	return &ArgumentsError{Tool: name, Err: se}
}
