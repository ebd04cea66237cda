package handlers

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dop251/goja"

	"svc/agent"
	"svc/agent/agenttest"
)

// answering is an outside that answers every rpc at once, as the benchmarks' host does: the
// engine's share of a call, without the process boundary.
type answering struct{}

func (answering) emit(*emitFrame)                {}
func (answering) record(string, json.RawMessage) {}
func (answering) rpc(m message) message {
	if m.Method == rpcCallSubagent {
		return message{Value: json.RawMessage(`"yes"`)}
	}
	return message{Value: json.RawMessage(`{"key":"c1-0","version":1}`)}
}

// BenchmarkEngineTriage is what a worker does for one call of the support-desk fixture's
// triage handler (BenchmarkCallTriage), its rpcs answered in process: a fresh runtime, the
// handler's ctx, the run and the result.
func BenchmarkEngineTriage(b *testing.B) {
	a, err := agent.LoadDir(agenttest.Dir(b, "support-desk"))
	if err != nil {
		b.Fatal(err)
	}
	def := a.Tools["triage"]
	prg, err := compile(def.Name, def.JS)
	if err != nil {
		b.Fatal(err)
	}
	spec := &callSpec{Tool: def.Name, UsesTools: def.Uses.Tools, UsesAgents: def.Uses.Subagents,
		Children: true, Subagents: true, MaxResultBytes: DefaultMaxResultBytes, MaxLogLines: DefaultMaxLogLines,
		MaxLogBytes: DefaultMaxLogBytes, MaxDepth: DefaultMaxDepth, Depth: 1, ID: "c",
		Args: json.RawMessage(`{"customer_id": "c1", "subject": "refund please"}`)}
	b.ReportAllocs()
	for b.Loop() {
		o := (&engine{spec: spec, prg: prg}).run(context.Background(), goja.New(), answering{})
		if o.Err != nil {
			b.Fatal(o.Err.Message)
		}
	}
}
