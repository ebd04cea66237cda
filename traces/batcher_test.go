package traces_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc/traces"
)

// memExporter keeps what it is given, batch by batch.
type memExporter struct {
	mu       sync.Mutex
	batches  []int
	names    []string
	shutdown bool
	exported chan struct{}
}

func (m *memExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	m.mu.Lock()
	m.batches = append(m.batches, len(ss))
	for _, s := range ss {
		m.names = append(m.names, s.Name())
	}
	m.mu.Unlock()
	select {
	case m.exported <- struct{}{}:
	default:
	}
	return nil
}

func (m *memExporter) Shutdown(context.Context) error {
	m.mu.Lock()
	m.shutdown = true
	m.mu.Unlock()
	return nil
}

func (m *memExporter) state() ([]int, []string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.batches...), append([]string(nil), m.names...), m.shutdown
}

func endSpans(tp *sdktrace.TracerProvider, n int, name string) {
	tr := tp.Tracer("t")
	for range n {
		_, s := tr.Start(context.Background(), name)
		s.End()
	}
}

func TestBatcherExportsAFullBatchAtOnce(t *testing.T) {
	exp := &memExporter{exported: make(chan struct{}, 16)}
	b := traces.NewBatcher(exp, traces.BatchConfig{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueueSize: 100, MaxExportBatchSize: 10})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	endSpans(tp, 25, "s")
	select {
	case <-exp.exported:
	case <-time.After(10 * time.Second):
		t.Fatal("a full batch was not exported before the schedule delay")
	}
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	batches, names, _ := exp.state()
	if len(names) != 25 {
		t.Fatalf("exported %d spans, want 25 (batches %v)", len(names), batches)
	}
	for _, n := range batches {
		if n > 10 {
			t.Errorf("a batch of %d spans, over the batch size 10: %v", n, batches)
		}
	}
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, shut := exp.state(); !shut {
		t.Error("Shutdown did not shut the exporter down")
	}
}

func TestBatcherScheduleDelayAndShutdown(t *testing.T) {
	exp := &memExporter{exported: make(chan struct{}, 16)}
	b := traces.NewBatcher(exp, traces.BatchConfig{ScheduleDelay: 20 * time.Millisecond, ExportTimeout: time.Second, MaxQueueSize: 100, MaxExportBatchSize: 50})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	endSpans(tp, 3, "early")
	select {
	case <-exp.exported:
	case <-time.After(10 * time.Second):
		t.Fatal("spans were not exported after the schedule delay")
	}
	endSpans(tp, 2, "late")
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, names, _ := exp.state()
	if got := strings.Join(names, ","); got != "early,early,early,late,late" {
		t.Errorf("exported %s", got)
	}
	endSpans(tp, 1, "after") // after Shutdown: dropped, no panic
}

func TestBatcherDropsOverTheQueueAndSkipsUnsampled(t *testing.T) {
	exp := &memExporter{exported: make(chan struct{}, 16)}
	block := make(chan struct{})
	slow := &blockingExporter{memExporter: exp, block: block, started: make(chan struct{})}
	b := traces.NewBatcher(slow, traces.BatchConfig{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueueSize: 5, MaxExportBatchSize: 5})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	endSpans(tp, 5, "first") // a full batch: its export blocks
	<-slow.started
	endSpans(tp, 7, "second") // 5 wait, 2 are dropped
	if got := b.Dropped(); got != 2 {
		t.Errorf("dropped %d, want 2", got)
	}
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithSampler(sdktrace.NeverSample()))
	endSpans(unsampled, 3, "unsampled")
	close(block)
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, names, _ := exp.state()
	if len(names) != 10 {
		t.Errorf("exported %d spans, want 10: %v", len(names), names)
	}
	if b.Exported() != 10 || b.Failed() != 0 {
		t.Errorf("Exported %d, Failed %d; want 10 and 0", b.Exported(), b.Failed())
	}
}

// TestBatcherCountsFailedExports: a failed export counts once, its spans are not exported, and
// the error goes to Err.
func TestBatcherCountsFailedExports(t *testing.T) {
	var got []error
	var mu sync.Mutex
	b := traces.NewBatcher(failingExporter{}, traces.BatchConfig{ScheduleDelay: time.Hour, ExportTimeout: time.Second, MaxQueueSize: 10, MaxExportBatchSize: 10})
	b.Err = func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() }
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	endSpans(tp, 3, "lost")
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if b.Failed() != 1 || b.Exported() != 0 || len(got) != 1 {
		t.Errorf("Failed %d, Exported %d, errors %v; want 1, 0 and one error", b.Failed(), b.Exported(), got)
	}
}

type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("receiver down")
}
func (failingExporter) Shutdown(context.Context) error { return nil }

type blockingExporter struct {
	*memExporter
	block   chan struct{}
	once    sync.Once
	started chan struct{}
}

func (e *blockingExporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	e.once.Do(func() { close(e.started) })
	<-e.block
	return e.memExporter.ExportSpans(ctx, ss)
}

func TestBatchConfigFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	c, err := traces.BatchConfigFromEnv(env("OTEL_BSP_SCHEDULE_DELAY", "200", "OTEL_BSP_MAX_QUEUE_SIZE", "4096", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1024", "OTEL_BSP_EXPORT_TIMEOUT", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	want := traces.BatchConfig{ScheduleDelay: 200 * time.Millisecond, ExportTimeout: time.Second, MaxQueueSize: 4096, MaxExportBatchSize: 1024}
	if c != want {
		t.Errorf("got %+v, want %+v", c, want)
	}
	if c, err := traces.BatchConfigFromEnv(env()); err != nil || c != traces.DefaultBatchConfig {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	for _, tc := range [][]string{
		{"OTEL_BSP_SCHEDULE_DELAY", "5s"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "0"},
		{"OTEL_BSP_EXPORT_TIMEOUT", "-1"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096"}, // over the queue's 2048
	} {
		if _, err := traces.BatchConfigFromEnv(env(tc...)); err == nil || !strings.Contains(err.Error(), tc[0]) {
			t.Errorf("%s=%s: err = %v, want one naming the setting", tc[0], tc[1], err)
		}
	}
}
