package stores_test

import (
	"context"
	"encoding/json"
	"testing"

	"svc/migrations/dbtest"
	"svc/runner/stores"
	"svc/runner/stores/storestest"
	"svc/runner/tools"
)

// benchBackends are the backends the benchmarks compare: memory, and the platform database on
// SQLite and Postgres.
var benchBackends = []struct {
	name string
	open func(b *testing.B) stores.Backend
}{
	{"memory", func(*testing.B) stores.Backend { return stores.NewMemory() }},
	{"sqlite", func(b *testing.B) stores.Backend { return stores.NewSQL(dbtest.SQLite(b), "bench") }},
	{"postgres", func(b *testing.B) stores.Backend { return stores.NewSQL(dbtest.Postgres(b), "bench") }},
}

// benchTool returns the tickets tool of action over a fresh backend holding the ticket acme-7.
func benchTool(b *testing.B, backend stores.Backend, action string) tools.Tool {
	b.Helper()
	r, err := stores.New(stores.Params{Stores: storestest.Definitions(), Backend: backend})
	if err != nil {
		b.Fatal(err)
	}
	fields := json.RawMessage(`{"customer_id":"acme","number":7,"subject":"Refund for order 1234","status":"open","amount_eur":49.90,"urgent":false}`)
	if _, err := r.Set(context.Background(), "tickets", fields, stores.Trace{}); err != nil {
		b.Fatal(err)
	}
	tool, err := stores.NewTool(r, "tickets", action)
	if err != nil {
		b.Fatal(err)
	}
	return tool
}

func benchCalls(b *testing.B, tool tools.Tool, args []json.RawMessage) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		res, err := tool.Call(ctx, tools.Call{ID: "call_1", Arguments: args[i%len(args)], Session: tools.Session{ID: "bench-session"}})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %s", tool.Spec().Name, err, res.Content)
		}
	}
}

// BenchmarkToolGet measures store__tickets__get of an existing record, arguments to result.
func BenchmarkToolGet(b *testing.B) {
	for _, bb := range benchBackends {
		b.Run(bb.name, func(b *testing.B) {
			tool := benchTool(b, bb.open(b), stores.ActionGet)
			benchCalls(b, tool, []json.RawMessage{json.RawMessage(`{"key":"acme-7"}`)})
		})
	}
}

// BenchmarkToolSet measures store__tickets__set of one record over and over: each call writes
// a new version, keeps the one before it (history.versions is 3) and prunes the oldest.
func BenchmarkToolSet(b *testing.B) {
	args := []json.RawMessage{
		json.RawMessage(`{"customer_id":"acme","number":7,"subject":"Refund for order 1234","status":"pending","amount_eur":49.90,"urgent":true}`),
		json.RawMessage(`{"customer_id":"acme","number":7,"subject":"Refund for order 1234","status":"open","amount_eur":49.90,"urgent":false}`),
	}
	for _, bb := range benchBackends {
		b.Run(bb.name, func(b *testing.B) {
			tool := benchTool(b, bb.open(b), stores.ActionSet)
			benchCalls(b, tool, args)
		})
	}
}
