package connections_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"svc/agent"
	"svc/runner/tools"
)

// TestToolSchemaMatchesTheTool: the request tool's parameter schema (what the model is offered
// and what the loop checks every call against) accepts the argument shapes the tool accepts and
// refuses those it refuses. The schema is stricter in one place on purpose: the method must be
// written in capitals, as its enum says, so a call with "get" is refused with the list of
// methods (the tool itself would take it, but every call, the model's and a handler's
// ctx.callTool, is checked against the schema first). Paths, intents and rules are the tool's
// to judge (Decide), not the schema's.
func TestToolSchemaMatchesTheTool(t *testing.T) {
	h := newHarness(t, http.HandlerFunc(echo(http.StatusOK)), []*agent.Connection{conn("status", deskPolicy(), deskAccess())}, nil)
	set := tools.NewSet(h.tool)
	tests := []struct {
		args         string
		ok           bool
		schemaStrict bool // refused by the schema only
	}{
		{`{"connection":"status","method":"GET","path":"/incidents"}`, true, false},
		{`{"connection":"status","method":"GET","path":"/incidents","query":{"q":"vpn","n":2,"all":true,"tag":["a","b"],"skip":null},"intent":"read"}`, true, false},
		{`{"connection":"status","method":"PUT","path":"/incidents/4/notes","intent":"write","body":{"text":"hi"}}`, true, false},
		{`{"connection":"status","method":"PUT","path":"/incidents/4/notes","intent":"confirmed_write","body":[1,"two"]}`, true, false},
		{`{"connection":"status","method":"GET","path":"/incidents","body":null}`, true, false},
		{`{"connection":"status","method":"get","path":"/incidents"}`, false, true},
		{`{"method":"GET","path":"/incidents"}`, false, false},
		{`{"connection":"billing","method":"GET","path":"/incidents"}`, false, false},
		{`{"connection":"status","method":"FETCH","path":"/incidents"}`, false, false},
		{`{"connection":"status","method":"GET","path":"/incidents","intent":"maybe"}`, false, false},
		{`{"connection":"status","method":"GET","path":"/incidents","query":{"q":{"a":1}}}`, false, false},
		{`{"connection":"status","method":"GET","path":"/incidents","query":{"q":[[1]]}}`, false, false},
		{`{"connection":"status","method":"GET","path":"/incidents","headers":{"x":"y"}}`, false, false},
		{`{"connection":"status","method":"GET","path":7}`, false, false},
		{`{"connection":"status","method":"GET"}`, false, false},
	}
	for _, tt := range tests {
		schemaErr := set.Check("request", json.RawMessage(tt.args))
		if errors.Is(schemaErr, tools.ErrBadSchema) {
			t.Fatal(schemaErr)
		}
		_, toolErr := h.tool.Decide(context.Background(), tools.Call{Arguments: json.RawMessage(tt.args)})
		switch {
		case tt.schemaStrict:
			if schemaErr == nil || toolErr != nil {
				t.Errorf("%s: schema %v, tool %v; want the schema alone to refuse it", tt.args, schemaErr, toolErr)
			}
		case (schemaErr == nil) != tt.ok || (toolErr == nil) != tt.ok:
			t.Errorf("%s: schema says %v, the tool says %v; want both to accept it: %v", tt.args, schemaErr, toolErr, tt.ok)
		}
	}
}
