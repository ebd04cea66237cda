package asynqqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/migrations/dbtest"
	"svc/workers"
	"svc/workers/asynqqueue"
	"svc/workers/queuetest"
)

func redisURL() string { return dbtest.RedisURL() }

// redisClient connects to the test Redis, skipping (or failing under CI) when it is not there.
func redisClient(tb testing.TB) *redis.Client { return dbtest.Redis(tb) }

// An address is the Redis URL with the test's private queue name as its fragment.
func splitAddr(tb testing.TB, addr string) (redisURL, queue string) {
	u, err := url.Parse(addr)
	if err != nil || u.Fragment == "" {
		tb.Fatalf("bad queue address %q", addr)
	}
	queue = u.Fragment
	u.Fragment = ""
	return u.String(), queue
}

var harness = queuetest.Harness{
	New: func(tb testing.TB) string {
		rdb := redisClient(tb)
		var b [6]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		queue := "svctest_" + hex.EncodeToString(b[:])
		tb.Cleanup(func() { deleteQueue(tb, rdb, queue) })
		return redisURL() + "#" + queue
	},
	Open: openQueue,
}

func openQueue(tb testing.TB, addr string, cfg queuetest.Config) workers.Queue {
	tb.Helper()
	u, queue := splitAddr(tb, addr)
	q, err := asynqqueue.New(asynqqueue.Config{
		RedisURL:     u,
		Queue:        queue,
		Concurrency:  cfg.Concurrency,
		PollInterval: cfg.PollInterval,
		RetryBase:    cfg.RetryBase,
		Lease:        cfg.Lease,
		Logger:       cfg.Logger,
	})
	if err != nil {
		tb.Fatalf("asynqqueue.New: %v", err)
	}
	tb.Cleanup(func() {
		if err := q.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return q
}

// deleteQueue removes every key of a test queue.
func deleteQueue(tb testing.TB, rdb *redis.Client, queue string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "asynq:{"+queue+"}:*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		tb.Errorf("scan queue keys: %v", err)
		return
	}
	if len(keys) > 0 {
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			tb.Errorf("delete queue keys: %v", err)
		}
	}
	if err := rdb.SRem(ctx, "asynq:queues", queue).Err(); err != nil {
		tb.Errorf("unregister queue: %v", err)
	}
}

func TestConformance(t *testing.T) { queuetest.Run(t, harness) }

// TestHelperProcess is the worker process that the crash test kills; see queuetest.HelperProcess.
func TestHelperProcess(t *testing.T) { queuetest.HelperProcess(t, openQueue) }

func BenchmarkQueue(b *testing.B) { queuetest.Benchmark(b, harness) }

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  asynqqueue.Config
		ok   bool
		want string
	}{
		{"defaults", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL}, true, ""},
		{"no RedisURL", asynqqueue.Config{}, false, "RedisURL"},
		{"wrong scheme", asynqqueue.Config{RedisURL: "http://127.0.0.1:6379"}, false, "RedisURL"},
		{"no host", asynqqueue.Config{RedisURL: "redis:///0"}, false, "RedisURL"},
		{"bad db number", asynqqueue.Config{RedisURL: "redis://127.0.0.1:6379/x"}, false, "RedisURL"},
		{"password is redacted", asynqqueue.Config{RedisURL: "redis://:secret@127.0.0.1:6379/x"}, false, "xxxxx"},
		{"Queue with a brace", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, Queue: "a{b}"}, false, "Queue"},
		{"Queue at limit", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, Queue: strings.Repeat("q", asynqqueue.MaxQueueLen)}, true, ""},
		{"Queue over limit", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, Queue: strings.Repeat("q", asynqqueue.MaxQueueLen+1)}, false, "Queue"},
		{"negative Concurrency", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, Concurrency: -1}, false, "Concurrency"},
		{"Concurrency at limit", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, Concurrency: asynqqueue.MaxConcurrency}, true, ""},
		{"Concurrency over limit", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, Concurrency: asynqqueue.MaxConcurrency + 1}, false, "Concurrency"},
		{"negative PollInterval", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, PollInterval: -1}, false, "PollInterval"},
		{"negative RetryBase", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, RetryBase: -1}, false, "RetryBase"},
		{"Lease too short", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, Lease: asynqqueue.MinLease - 1}, false, "Lease"},
		{"negative Lease", asynqqueue.Config{RedisURL: dbtest.DefaultRedisURL, Lease: -1}, false, "Lease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := asynqqueue.New(tt.cfg)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("New = %v, want nil", err)
			case tt.ok:
				if err := q.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			case !errors.Is(err, asynqqueue.ErrConfig) || !strings.Contains(err.Error(), tt.want):
				t.Fatalf("New = %v, want ErrConfig naming %s", err, tt.want)
			case strings.Contains(err.Error(), "secret"):
				t.Fatalf("New = %v: leaks the password", err)
			}
		})
	}
}

func TestRunReportsUnreachableRedis(t *testing.T) {
	q, err := asynqqueue.New(asynqqueue.Config{RedisURL: "redis://127.0.0.1:1/0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := q.Run(context.Background(), workers.NewServeMux()); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("Run = %v, want an unreachable-redis error", err)
	}
}

// openShort opens a queue on addr with the shortest lease, so that a reaping mistake shows fast.
func openShort(t *testing.T, addr string) *asynqqueue.Queue {
	t.Helper()
	u, queue := splitAddr(t, addr)
	q, err := asynqqueue.New(asynqqueue.Config{RedisURL: u, Queue: queue, PollInterval: 20 * time.Millisecond, RetryBase: 10 * time.Millisecond, Lease: asynqqueue.MinLease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func runQueue(t *testing.T, q *asynqqueue.Queue, mux *workers.ServeMux) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, mux) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// TestLiveTaskIsNotReaped: a task running many leases long on a live worker, with other workers
// reaping, runs once.
func TestLiveTaskIsNotReaped(t *testing.T) {
	addr := harness.New(t)
	var runs atomic.Int32
	done := make(chan struct{})
	mux := workers.NewServeMux()
	mux.HandleFunc("long", func(ctx context.Context, _ workers.Task) error {
		runs.Add(1)
		select {
		case <-time.After(6 * asynqqueue.MinLease):
		case <-ctx.Done():
			return ctx.Err()
		}
		close(done)
		return nil
	})
	q1, q2 := openShort(t, addr), openShort(t, addr)
	runQueue(t, q1, mux)
	runQueue(t, q2, mux)
	if err := q1.Enqueue(context.Background(), workers.Task{Type: "long", ID: "long"}, workers.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the task never completed")
	}
	time.Sleep(2 * asynqqueue.MinLease) // a wrongful requeue would show as a second run
	if n := runs.Load(); n != 1 {
		t.Fatalf("runs = %d, want 1", n)
	}
}

// TestLostLivenessCancelsHandler: when a running task's liveness mark disappears (its worker was
// cut off long enough for the task to be requeued), the handler's ctx is cancelled, and the task
// runs again.
func TestLostLivenessCancelsHandler(t *testing.T) {
	addr := harness.New(t)
	_, queue := splitAddr(t, addr)
	rdb := redisClient(t)
	attempts := make(chan int, 4)
	cancelled := make(chan error, 4)
	mux := workers.NewServeMux()
	mux.HandleFunc("t", func(ctx context.Context, _ workers.Task) error {
		attempts <- workers.Attempt(ctx)
		if workers.Attempt(ctx) > 1 {
			return nil
		}
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return ctx.Err()
	})
	q := openShort(t, addr)
	runQueue(t, q, mux)
	if err := q.Enqueue(context.Background(), workers.Task{Type: "t", ID: "t"}, workers.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if a := <-attempts; a != 1 {
		t.Fatalf("first attempt = %d", a)
	}
	if err := rdb.Del(context.Background(), "asynq:{"+queue+"}:svc-alive:t").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cancelled:
		t.Logf("handler ctx cancelled: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the handler's ctx was not cancelled")
	}
	select {
	case a := <-attempts:
		if a != 2 {
			t.Fatalf("second attempt = %d, want 2", a)
		}
	case <-time.After(time.Minute):
		t.Fatal("the task did not run again")
	}
}
