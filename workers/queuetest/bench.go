package queuetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"svc/workers"
)

// Benchmark measures enqueue-to-processed throughput on a fresh backend from h: b.N tasks are
// enqueued by GOMAXPROCS concurrent producers while one Run with Concurrency 8 processes them,
// and the clock stops when the last handler returns. It reports tasks per second.
func Benchmark(b *testing.B, h Harness) {
	cfg := baseConfig(b)
	cfg.Concurrency = 8
	cfg.PollInterval = 10 * time.Millisecond
	addr := h.New(b)
	q := h.Open(b, addr, cfg)
	var processed atomic.Int64
	var target atomic.Int64
	done := make(chan struct{}, 1)
	mux := workers.NewServeMux()
	mux.HandleFunc("bench", func(ctx context.Context, task workers.Task) error {
		if processed.Add(1) == target.Load() {
			done <- struct{}{}
		}
		return nil
	})
	start(b, q, mux)
	b.ReportAllocs()
	b.ResetTimer()
	began := time.Now()
	target.Store(int64(b.N))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := q.Enqueue(context.Background(), workers.Task{Type: "bench", Payload: []byte(`{"buildId":"b"}`)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	select {
	case <-done:
	case <-time.After(waitLimit):
		b.Fatalf("processed %d of %d tasks within %v", processed.Load(), b.N, waitLimit)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "tasks/s")
}
