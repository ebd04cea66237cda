package handlers_test

import (
	"context"
	"encoding/json"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/handlers"
	"svc/runner/tools"
)

// BenchmarkCall is one call of a trivial async handler as Call makes it: a round trip to a
// warm sandbox worker, which runs it in a fresh runtime.
func BenchmarkCall(b *testing.B) {
	h := newTool(b, "export default async function (p: {n: number}, ctx: any) {\n  await null;\n  return {n: p.n + 1};\n}\n", handlers.Options{})
	c := tools.Call{ID: "c", Arguments: json.RawMessage(`{"n": 1}`)}
	benchCalls(b, h, c)
}

// BenchmarkCallTriage is one call of the support-desk fixture's triage handler, which calls a
// store tool through ctx.callTool (a second round trip).
func BenchmarkCallTriage(b *testing.B) {
	a, err := agent.LoadDir(agenttest.Dir(b, "support-desk"))
	if err != nil {
		b.Fatal(err)
	}
	set := &setTool{written: func() {}}
	h, err := handlers.New(a.Tools["triage"], sandboxed(handlers.Options{
		Children: func(string) (tools.Tool, error) { return set, nil },
		Subagent: func(context.Context, string, string, json.RawMessage, []tools.Attachment, tools.Call) (string, error) {
			return "yes", nil
		}}))
	if err != nil {
		b.Fatal(err)
	}
	benchCalls(b, h, tools.Call{ID: "c", Arguments: json.RawMessage(`{"customer_id": "c1", "subject": "refund please"}`)})
}

func benchCalls(b *testing.B, h *handlers.Tool, c tools.Call) {
	if _, err := h.Call(b.Context(), c); err != nil { // the worker starts and compiles
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Call(b.Context(), c); err != nil {
			b.Fatal(err)
		}
	}
}
