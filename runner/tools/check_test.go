package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/agent/toolschema"
	"svc/runner/models"
	"svc/runner/tools"
)

// fixed is a tool with a given spec that records its calls.
type fixed struct {
	spec  models.ToolSpec
	calls int
}

func (f *fixed) Spec() models.ToolSpec { return f.spec }
func (f *fixed) Call(context.Context, tools.Call) (tools.Result, error) {
	f.calls++
	return tools.Result{Content: "ok"}, nil
}

func TestSetCheck(t *testing.T) {
	good := &fixed{spec: models.ToolSpec{Name: "good", Parameters: json.RawMessage(
		`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}}
	bad := &fixed{spec: models.ToolSpec{Name: "bad", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"nope"}}}`)}}
	bare := &fixed{spec: models.ToolSpec{Name: "bare"}} // no parameters: any object
	set := tools.NewSet(good, bad, bare)

	if err := set.Check("good", json.RawMessage(`{"n":1}`)); err != nil {
		t.Errorf("Check(good, valid) = %v", err)
	}
	err := set.Check("good", json.RawMessage(`{"n":"1"}`))
	var ae *tools.ArgumentsError
	if !errors.As(err, &ae) || ae.Tool != "good" || !errors.Is(err, tools.ErrBadArguments) {
		t.Fatalf("Check(good, wrong type) = %v, want an *ArgumentsError wrapping ErrBadArguments", err)
	}
	if want := "invalid arguments for good: n: must be an integer, got string"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	var se *toolschema.Error
	if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Path != "n" {
		t.Errorf("the schema's problems: %+v", se)
	}
	if err := set.Check("bad", json.RawMessage(`{}`)); !errors.Is(err, tools.ErrBadSchema) {
		t.Errorf("Check(bad) = %v, want ErrBadSchema", err)
	}
	if err := set.Check("bare", json.RawMessage(`{"x":[1]}`)); err != nil {
		t.Errorf("Check(bare, object) = %v", err)
	}
	if err := set.Check("bare", json.RawMessage(`[]`)); err == nil {
		t.Error("Check(bare, array) = nil, want an error: arguments are an object")
	}
	if err := set.Check("missing", json.RawMessage(`{}`)); err != nil {
		t.Errorf("Check(unknown tool) = %v, want nil (the loop refuses unknown tools itself)", err)
	}
	var nilSet *tools.Set
	if err := nilSet.Check("good", nil); err != nil {
		t.Errorf("nil set: %v", err)
	}
	// With keeps the checks of the tools it carries over and adds the new ones.
	more := set.With(&fixed{spec: models.ToolSpec{Name: "more", Parameters: json.RawMessage(`{"type":"object","required":["a"]}`)}})
	if err := more.Check("good", json.RawMessage(`{}`)); err == nil || err.Error() != "invalid arguments for good: n: required" {
		t.Errorf("With: Check(good) = %v", err)
	}
	if err := more.Check("more", json.RawMessage(`{}`)); err == nil || err.Error() != "invalid arguments for more: a: required" {
		t.Errorf("With: Check(more) = %v", err)
	}
	if good.calls+bad.calls+bare.calls != 0 {
		t.Error("Check ran a tool")
	}
}

// TestBuiltinSchemasMatchTheTools: every argument object the schema of a built-in accepts, the
// built-in accepts too, and what the schema refuses the built-in refuses as well (apart from the
// rules a schema cannot state, such as unique option values): the schema offered to the model
// says what the tool takes.
func TestBuiltinSchemasMatchTheTools(t *testing.T) {
	desk := load(t, "support-desk")
	lk := tools.NewLoadKnowledge(desk.Knowledge)
	ls := tools.NewLoadSkill(desk.Skills)
	ask := tools.NewAskUser()
	ho := tools.NewHandoff([]string{"billing", "sales"})
	set := tools.NewSet(lk, ls, ask, ho)
	long := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'x'
		}
		return string(b)
	}
	opts := func(n int) string {
		s := "["
		for i := range n {
			if i > 0 {
				s += ","
			}
			s += `{"value":"v` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `","label":"L"}`
		}
		return s + "]"
	}
	tests := []struct {
		tool tools.Tool
		args string
		ok   bool
	}{
		{lk, `{"name":"plans"}`, true},
		{lk, `{}`, false},
		{lk, `{"name":"nope"}`, false},
		{lk, `{"name":1}`, false},
		{lk, `{"name":"plans","extra":1}`, false},
		{ls, `{"name":"refunds"}`, true},
		{ls, `{"name":""}`, false},
		{ask, `{"question":"Q?","options":[{"value":"a","label":"A"}]}`, true},
		{ask, `{"question":"Q?","options":[{"value":"a","label":"A"}],"multi":true}`, true},
		{ask, `{"question":"Q?","options":` + opts(20) + `}`, true},
		{ask, `{"question":"Q?","options":` + opts(21) + `}`, false},
		{ask, `{"question":"` + long(2000) + `","options":[{"value":"a","label":"A"}]}`, true},
		{ask, `{"question":"` + long(2001) + `","options":[{"value":"a","label":"A"}]}`, false},
		{ask, `{"question":"Q?","options":[{"value":"` + long(200) + `","label":"` + long(200) + `"}]}`, true},
		{ask, `{"question":"Q?","options":[{"value":"a","label":"` + long(201) + `"}]}`, false},
		{ask, `{"question":"","options":[{"value":"a","label":"A"}]}`, false},
		{ask, `{"question":"Q?","options":[]}`, false},
		{ask, `{"question":"Q?","options":[{"value":"","label":"A"}]}`, false},
		{ask, `{"question":"Q?","options":[{"value":"a","label":""}]}`, false},
		{ask, `{"question":"Q?","options":[{"value":"a"}]}`, false},
		{ask, `{"question":"Q?","options":[{"value":"a","label":"A","icon":"x"}]}`, false},
		{ask, `{"question":"Q?","options":[{"value":"a","label":"A"}],"multi":"yes"}`, false},
		{ho, `{"agent":"sales"}`, true},
		{ho, `{"agent":"support"}`, false},
		{ho, `{}`, false},
	}
	for _, tt := range tests {
		name := tt.tool.Spec().Name
		schemaErr := set.Check(name, json.RawMessage(tt.args))
		if errors.Is(schemaErr, tools.ErrBadSchema) {
			t.Fatalf("%s: %v", name, schemaErr)
		}
		_, callErr := tt.tool.Call(context.Background(), tools.Call{Arguments: json.RawMessage(tt.args)})
		if (schemaErr == nil) != tt.ok || (callErr == nil) != tt.ok {
			t.Errorf("%s %.80s: schema says %v, the tool says %v; want both to accept it: %v", name, tt.args, schemaErr, callErr, tt.ok)
		}
	}
}

// TestForAgentSchemasCompile: every tool the selection offers for the fixtures has a schema that
// compiles.
func TestForAgentSchemasCompile(t *testing.T) {
	for _, name := range []string{"support-desk", "hello"} {
		ag := load(t, name)
		for _, named := range append([]*agent.NamedAgent{nil}, mapValues(ag.Agents)...) {
			sel := tools.ForAgent(ag, named, tools.Extensions{})
			for _, tool := range sel.Set.Names() {
				if err := sel.Set.Check(tool, json.RawMessage(`{}`)); errors.Is(err, tools.ErrBadSchema) {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}

func mapValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// BenchmarkCheck is the cost the loop adds to every tool call: the check of its arguments
// against the tool's compiled schema, for a tool of support-desk (triage: two strings), a
// built-in with nested objects (ask_user) and one with an enum (load_knowledge).
func BenchmarkCheck(b *testing.B) {
	desk, err := agent.LoadDir(agenttest.Dir(b, "support-desk"))
	if err != nil {
		b.Fatal(err)
	}
	triage := desk.Tools["triage"]
	set := tools.NewSet(&fixed{spec: models.ToolSpec{Name: triage.Name, Parameters: triage.Parameters}},
		tools.NewAskUser(), tools.NewLoadKnowledge(desk.Knowledge))
	for _, c := range []struct{ tool, args string }{
		{"triage", `{"customer_id":"c1","subject":"refund my invoice"}`},
		{"ask_user", `{"question":"Which plan?","options":[{"value":"pro","label":"Pro"},{"value":"team","label":"Team"}],"multi":false}`},
		{"load_knowledge", `{"name":"refund-policy"}`},
	} {
		args := json.RawMessage(c.args)
		b.Run(c.tool, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := set.Check(c.tool, args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
