package traces

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BatchConfig bounds the Batcher; the OTEL_BSP_* settings of the OpenTelemetry specification.
type BatchConfig struct {
	// ScheduleDelay is the longest a span waits before it is exported (OTEL_BSP_SCHEDULE_DELAY).
	ScheduleDelay time.Duration
	// ExportTimeout bounds one export (OTEL_BSP_EXPORT_TIMEOUT).
	ExportTimeout time.Duration
	// MaxQueueSize is how many ended spans wait at most; more are dropped (OTEL_BSP_MAX_QUEUE_SIZE).
	MaxQueueSize int
	// MaxExportBatchSize is the most spans one export carries, and how many ended spans start an
	// export before the delay is over (OTEL_BSP_MAX_EXPORT_BATCH_SIZE).
	MaxExportBatchSize int
}

// DefaultBatchConfig is the specification's defaults.
var DefaultBatchConfig = BatchConfig{ScheduleDelay: 5 * time.Second, ExportTimeout: 30 * time.Second, MaxQueueSize: 2048, MaxExportBatchSize: 512}

// BatchConfigFromEnv reads OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT (milliseconds),
// OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE over the defaults.
func BatchConfigFromEnv(lookup func(string) (string, bool)) (BatchConfig, error) {
	c := DefaultBatchConfig
	num := func(name string, min, max int64) (int64, bool, error) {
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < min || n > max {
			return 0, false, fmt.Errorf("setting %s = %q: want a whole number from %d to %d", name, v, min, max)
		}
		return n, true, nil
	}
	for _, s := range []struct {
		name     string
		min, max int64
		set      func(int64)
	}{
		{"OTEL_BSP_SCHEDULE_DELAY", 1, 600_000, func(n int64) { c.ScheduleDelay = time.Duration(n) * time.Millisecond }},
		{"OTEL_BSP_EXPORT_TIMEOUT", 1, 600_000, func(n int64) { c.ExportTimeout = time.Duration(n) * time.Millisecond }},
		{"OTEL_BSP_MAX_QUEUE_SIZE", 1, 1 << 20, func(n int64) { c.MaxQueueSize = int(n) }},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, 1 << 20, func(n int64) { c.MaxExportBatchSize = int(n) }},
	} {
		n, ok, err := num(s.name, s.min, s.max)
		if err != nil {
			return c, err
		}
		if ok {
			s.set(n)
		}
	}
	if c.MaxExportBatchSize > c.MaxQueueSize {
		return c, fmt.Errorf("setting OTEL_BSP_MAX_EXPORT_BATCH_SIZE = %d: must not exceed OTEL_BSP_MAX_QUEUE_SIZE (%d)", c.MaxExportBatchSize, c.MaxQueueSize)
	}
	return c, nil
}

// Batcher is an sdktrace.SpanProcessor that batches ended, sampled spans for an exporter, as the
// SDK's batch span processor does, without waking its goroutine for every span: OnEnd appends
// under a mutex and signals only when a batch is full; the goroutine otherwise wakes when the
// schedule delay is over. (The SDK's processor hands each span over a channel, one goroutine
// wake-up per span: at thousands of turns a second that was a visible part of what tracing cost.)
type Batcher struct {
	exp sdktrace.SpanExporter
	cfg BatchConfig
	// Err receives export errors (otel.Handle, the global error handler, unless set before the
	// first span ends).
	Err func(error)

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan
	spare   []sdktrace.ReadOnlySpan // the previous batch's array, for the next queue
	flushes []chan struct{}         // ForceFlush calls waiting for the next export round
	stopped bool

	full     chan struct{} // capacity 1: a batch is full, or a flush is asked for
	stop     chan struct{}
	done     chan struct{}
	dropped  atomic.Int64
	exported atomic.Int64 // spans in exports that succeeded
	failed   atomic.Int64 // exports that failed
	once     sync.Once
}

// NewBatcher starts the Batcher's goroutine; Shutdown ends it.
func NewBatcher(exp sdktrace.SpanExporter, cfg BatchConfig) *Batcher {
	if cfg.ScheduleDelay <= 0 || cfg.MaxQueueSize <= 0 || cfg.MaxExportBatchSize <= 0 || cfg.ExportTimeout <= 0 {
		cfg = DefaultBatchConfig
	}
	b := &Batcher{exp: exp, cfg: cfg, Err: otel.Handle, full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// OnStart does nothing.
func (b *Batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span; a full queue, or a shut-down Batcher, drops it (Dropped counts them).
func (b *Batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped || len(b.queue) >= b.cfg.MaxQueueSize {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	if b.queue == nil {
		b.queue, b.spare = b.spare[:0], nil
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) == b.cfg.MaxExportBatchSize
	b.mu.Unlock()
	if full {
		b.signal()
	}
}

// Dropped is how many spans were dropped: the queue was full, or the Batcher shut down.
func (b *Batcher) Dropped() int64 { return b.dropped.Load() }

// Exported is how many spans went out in exports that succeeded.
func (b *Batcher) Exported() int64 { return b.exported.Load() }

// Failed is how many exports failed (after the exporter's own retries); their spans are lost.
func (b *Batcher) Failed() int64 { return b.failed.Load() }

func (b *Batcher) signal() {
	select {
	case b.full <- struct{}{}:
	default:
	}
}

func (b *Batcher) run() {
	defer close(b.done)
	t := time.NewTimer(b.cfg.ScheduleDelay)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			b.exportAll()
			return
		case <-t.C:
		case <-b.full:
		}
		b.exportAll()
		t.Reset(b.cfg.ScheduleDelay)
	}
}

// exportAll exports what is queued, in batches, then releases the flushes that waited for it.
func (b *Batcher) exportAll() {
	b.mu.Lock()
	q, flushes := b.queue, b.flushes
	b.queue, b.flushes = nil, nil
	b.mu.Unlock()
	for len(q) > 0 {
		n := min(len(q), b.cfg.MaxExportBatchSize)
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ExportTimeout)
		err := b.exp.ExportSpans(ctx, q[:n])
		cancel()
		if err == nil {
			b.exported.Add(int64(n))
		} else {
			b.failed.Add(1)
			if b.Err != nil {
				b.Err(err)
			}
		}
		clear(q[:n]) // the spans may go
		q = q[n:]
	}
	b.mu.Lock()
	if q = q[:0]; cap(q) > 0 && cap(q) <= 2*b.cfg.MaxQueueSize {
		b.spare = q[:0:cap(q)]
	}
	b.mu.Unlock()
	for _, f := range flushes {
		close(f)
	}
}

// ForceFlush exports every span ended before the call.
func (b *Batcher) ForceFlush(ctx context.Context) error {
	f := make(chan struct{})
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	b.flushes = append(b.flushes, f)
	b.mu.Unlock()
	b.signal()
	select {
	case <-f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, stops the goroutine and shuts the exporter down.
func (b *Batcher) Shutdown(ctx context.Context) error {
	var err error
	b.once.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		err = errors.Join(err, b.exp.Shutdown(ctx))
	})
	return err
}
