package stores_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/stores"
	"svc/runner/stores/storestest"
	"svc/runner/tools"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func toolNames(ts []tools.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Spec().Name)
	}
	return out
}

func TestToolsFollowAccessModes(t *testing.T) {
	r := newMemoryRecords(t)
	got := toolNames(stores.Tools(r, map[string]string{"tickets": "r", "notes": "rw", "ghost": "rw", "drafts": "w"}))
	want := []string{
		"store__notes__get", "store__notes__set", "store__notes__query", "store__notes__delete", "store__notes__history",
		"store__tickets__get", "store__tickets__query", "store__tickets__history",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("tools (-want +got):\n%s", d)
	}
	if got := stores.Tools(r, nil); len(got) != 0 {
		t.Fatalf("no access: %v", toolNames(got))
	}
	tool, err := stores.NewTool(r, "tickets", "history")
	if err != nil || tool.Spec().Name != "store__tickets__history" {
		t.Fatalf("NewTool = %v, %v", tool, err)
	}
	if _, err := stores.NewTool(r, "ghost", "get"); !errors.Is(err, stores.ErrUnknownStore) {
		t.Fatalf("NewTool(ghost) err = %v", err)
	}
	if _, err := stores.NewTool(r, "tickets", "drop"); err == nil {
		t.Fatal("NewTool(drop) succeeded")
	}
}

// TestToolSpecs keeps what a model sees of the tickets store in testdata/tickets_tools.json
// (go test -run TestToolSpecs -update rewrites it).
func TestToolSpecs(t *testing.T) {
	r := newMemoryRecords(t)
	type spec struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	var specs []spec
	for _, tool := range stores.Tools(r, map[string]string{"tickets": "rw"}) {
		s := tool.Spec()
		if !json.Valid(s.Parameters) {
			t.Fatalf("%s: parameters are not JSON: %s", s.Name, s.Parameters)
		}
		specs = append(specs, spec{s.Name, s.Description, s.Parameters})
	}
	got, err := json.MarshalIndent(specs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "tickets_tools.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Fatalf("tool specs (-want +got), rerun with -update if intended:\n%s", d)
	}
}

// caller calls the store tools of one Records as the loop does.
type caller struct {
	t       *testing.T
	tools   map[string]tools.Tool
	ctx     context.Context
	session string
}

func newCaller(t *testing.T, r *stores.Records) *caller {
	c := &caller{t: t, tools: map[string]tools.Tool{}, ctx: context.Background(), session: "sess-1"}
	for _, tool := range stores.Tools(r, map[string]string{"tickets": "rw", "notes": "rw"}) {
		c.tools[tool.Spec().Name] = tool
	}
	return c
}

// call runs a tool and returns its result; a Go error fails the test.
func (c *caller) call(name, id, args string) tools.Result {
	c.t.Helper()
	res, err := c.tools[name].Call(c.ctx, tools.Call{ID: id, Arguments: json.RawMessage(args), Session: tools.Session{ID: c.session}})
	if err != nil {
		c.t.Fatalf("%s(%s): %v", name, args, err)
	}
	if !res.IsError && res.Content != string(res.Data) {
		c.t.Fatalf("%s: Content %q differs from Data %s", name, res.Content, res.Data)
	}
	return res
}

// ok runs a tool that must succeed and returns its Data.
func (c *caller) ok(name, args string) string {
	c.t.Helper()
	res := c.call(name, "call-"+name, args)
	if res.IsError {
		c.t.Fatalf("%s(%s): error result %q", name, args, res.Content)
	}
	return string(res.Data)
}

func TestToolResults(t *testing.T) {
	r, err := stores.New(stores.Params{Stores: storestest.Definitions(), Backend: stores.NewMemory(), Now: func() time.Time { return storestest.Base }})
	if err != nil {
		t.Fatal(err)
	}
	c := newCaller(t, r)
	steps := []struct{ tool, args, want string }{
		{"store__tickets__get", `{"key":"acme-7"}`, `{"key":"acme-7","found":false}`},
		{"store__tickets__set", `{"customer_id":"acme","number":7,"status":"open","subject":"<b>Refund</b>"}`,
			`{"key":"acme-7","version":1,"value":{"customer_id":"acme","number":7,"status":"open","subject":"<b>Refund</b>"}}`},
		{"store__tickets__set", `{"customer_id":"acme","number":7,"status":"closed"}`,
			`{"key":"acme-7","version":2,"value":{"customer_id":"acme","number":7,"status":"closed"}}`},
		{"store__tickets__get", `{"key":"acme-7"}`, `{"key":"acme-7","version":2,"value":{"customer_id":"acme","number":7,"status":"closed"}}`},
		{"store__tickets__set", `{"customer_id":"acme","number":8,"status":"open"}`, `{"key":"acme-8","version":1,"value":{"customer_id":"acme","number":8,"status":"open"}}`},
		{"store__tickets__query", `{}`, `{"items":[{"key":"acme-7","version":2,"value":{"customer_id":"acme","number":7,"status":"closed"}},{"key":"acme-8","version":1,"value":{"customer_id":"acme","number":8,"status":"open"}}]}`},
		{"store__tickets__query", `{"where":{"status":"open"},"limit":1}`, `{"items":[{"key":"acme-8","version":1,"value":{"customer_id":"acme","number":8,"status":"open"}}]}`},
		{"store__tickets__query", `{"where":null,"limit":500}`, `{"items":[{"key":"acme-7","version":2,"value":{"customer_id":"acme","number":7,"status":"closed"}},{"key":"acme-8","version":1,"value":{"customer_id":"acme","number":8,"status":"open"}}]}`},
		{"store__tickets__query", `{"where":{"customer_id":"nobody"}}`, `{"items":[]}`},
		{"store__tickets__history", `{"key":"acme-7"}`, `{"key":"acme-7","versions":[` +
			`{"version":2,"value":{"customer_id":"acme","number":7,"status":"closed"},"updated_at":"2026-05-06T07:08:09.123456Z",` +
			`"trace":{"session_id":"sess-1","tool_call_id":"call-store__tickets__set","at":"2026-05-06T07:08:09.123456Z"}},` +
			`{"version":1,"value":{"customer_id":"acme","number":7,"status":"open","subject":"<b>Refund</b>"},"updated_at":"2026-05-06T07:08:09.123456Z",` +
			`"trace":{"session_id":"sess-1","tool_call_id":"call-store__tickets__set","at":"2026-05-06T07:08:09.123456Z"}}]}`},
		{"store__tickets__history", `{"key":"none-1"}`, `{"key":"none-1","versions":[]}`},
		{"store__tickets__delete", `{"key":"acme-7"}`, `{"key":"acme-7","deleted":true}`},
		{"store__tickets__delete", `{"key":"acme-7"}`, `{"key":"acme-7","deleted":false}`},
		{"store__tickets__get", `{"key":"acme-7"}`, `{"key":"acme-7","found":false}`},
	}
	for i, s := range steps {
		if got := c.ok(s.tool, s.args); got != s.want {
			t.Fatalf("step %d, %s(%s):\n got %s\nwant %s", i, s.tool, s.args, got, s.want)
		}
	}
}

func TestToolErrorsNameTheField(t *testing.T) {
	c := newCaller(t, newMemoryRecords(t))
	tests := []struct{ tool, args, want string }{
		{"store__tickets__set", `{"customer_id":"a","number":1,"colour":"red"}`, `field "colour": unknown field; Ticket has the fields`},
		{"store__tickets__set", `{"customer_id":"a","number":1,"status":"done"}`, `field "status": must be one of open, pending, closed; got "done"`},
		{"store__tickets__set", `{"customer_id":"a","number":"1"}`, `field "number": must be an integer, got the string "1"`},
		{"store__tickets__set", `{"customer_id":"a"}`, `field "number": missing; it is part of the key "{customer_id}-{number}"`},
		{"store__tickets__set", ``, `the record must be a JSON object`},
		{"store__tickets__get", `{}`, `field "key": missing; it is {customer_id}-{number} filled in`},
		{"store__tickets__get", `{"key":7}`, `field "key": must be a string, got 7`},
		{"store__tickets__get", `{"key":""}`, `field "key": must not be empty`},
		{"store__tickets__get", `{"key":"a-1","id":"a"}`, `field "id": unknown argument; store__tickets__get takes key`},
		{"store__tickets__get", `[1]`, `the arguments must be a JSON object with key`},
		{"store__tickets__delete", `{"key":null}`, `field "key": must not be empty`},
		{"store__tickets__history", `{"keys":"a"}`, `field "keys": unknown argument`},
		{"store__tickets__query", `{"limit":501}`, `field "limit": must be an integer between 1 and 500, got 501`},
		{"store__tickets__query", `{"limit":0}`, `field "limit": must be an integer between 1 and 500, got 0`},
		{"store__tickets__query", `{"limit":2.5}`, `field "limit"`},
		{"store__tickets__query", `{"limit":"5"}`, `field "limit"`},
		{"store__tickets__query", `{"where":"status=open"}`, `field "where": must be an object`},
		{"store__tickets__query", `{"where":{"state":"open"}}`, `field "where.state": unknown field`},
		{"store__tickets__query", `{"where":{"tags":["a"]}}`, `field "where.tags": is of type array`},
		{"store__tickets__query", `{"order":"asc"}`, `field "order": unknown argument; store__tickets__query takes where and limit`},
	}
	for _, tc := range tests {
		res := c.call(tc.tool, "call-1", tc.args)
		if !res.IsError || !strings.Contains(res.Content, tc.want) {
			t.Errorf("%s(%s) = %+v, want an error result containing %q", tc.tool, tc.args, res, tc.want)
		}
	}
	// A limit of 500 is fine; 1e2 is an integer written otherwise.
	c.ok("store__tickets__query", `{"limit":500}`)
	c.ok("store__tickets__query", `{"limit":1e2}`)
}

func TestToolTraces(t *testing.T) {
	r := newMemoryRecords(t)
	c := newCaller(t, r)
	if res := c.call("store__tickets__set", "call_42", `{"customer_id":"a","number":1}`); res.IsError {
		t.Fatal(res.Content)
	}
	c.session = "" // a run without a session
	if res := c.call("store__tickets__set", "call_43", `{"customer_id":"a","number":1}`); res.IsError {
		t.Fatal(res.Content)
	}
	hist, err := r.History(context.Background(), "tickets", "a-1")
	if err != nil {
		t.Fatal(err)
	}
	want := []*stores.Trace{{ToolCallID: "call_43"}, {SessionID: "sess-1", ToolCallID: "call_42"}}
	var got []*stores.Trace
	for _, rec := range hist {
		got = append(got, rec.Trace)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("traces (-want +got):\n%s", d)
	}
}

func TestToolBackendFailureIsAnError(t *testing.T) {
	c := newCaller(t, newMemoryRecords(t))
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("client left"))
	c.ctx = ctx
	res, err := c.tools["store__tickets__get"].Call(ctx, tools.Call{ID: "x", Arguments: json.RawMessage(`{"key":"a-1"}`)})
	if err == nil || !strings.Contains(err.Error(), "store__tickets__get") {
		t.Fatalf("Call = %+v, %v; want an error naming the tool", res, err)
	}
}

func TestToolLabels(t *testing.T) {
	r := newMemoryRecords(t)
	tool, err := stores.NewTool(r, "tickets", "get")
	if err != nil {
		t.Fatal(err)
	}
	running, done := tool.(tools.Labeler).Labels(json.RawMessage(`{"key":"acme-7"}`))
	if running != "Reading tickets acme-7" || done != "Read tickets acme-7" {
		t.Fatalf("Labels = %q, %q", running, done)
	}
}
