package durable_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"svc/migrations/dbtest"
	"svc/runner/durable"
)

// BenchmarkRecord measures one journal entry per op on one running run, each under a new key:
// the hot path of a durable handler's steps.
func BenchmarkRecord(b *testing.B) {
	bench := func(b *testing.B, s durable.Store) {
		ctx := context.Background()
		r := newRun("run_bench", durable.Running, 1)
		r.LeaseUntil = time.Now().Add(time.Hour)
		if err := s.Create(ctx, r); err != nil {
			b.Fatal(err)
		}
		value := json.RawMessage(`{"ok":true,"id":"ord_123","amount":12.5}`)
		at := time.Now().UTC()
		i := 0
		for b.Loop() {
			i++
			if err := s.Record(ctx, "run_bench", 1, durable.Entry{Key: "step:charge#" + strconv.Itoa(i), Value: value, At: at}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { bench(b, &durable.Memory{}) })
	b.Run("sqlite", func(b *testing.B) { bench(b, durable.NewDB(dbtest.SQLite(b))) })
	// dbtest skips this outside CI when no Postgres answers, and fails it under CI.
	b.Run("postgres", func(b *testing.B) { bench(b, durable.NewDB(dbtest.Postgres(b))) })
}
