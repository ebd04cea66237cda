package asynqqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
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
	Open:         openQueue,
	ExpireLeases: expireLeases,
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

// expireLeases ages every lease of the queue past asynq's fixed 30s lease and 30s clock-skew
// allowance, standing in for the minute a real crash would have to wait (see the package doc;
// SVC_TEST_REAL_LEASE=1 waits for real instead).
func expireLeases(tb testing.TB, addr string) {
	tb.Helper()
	_, queue := splitAddr(tb, addr)
	rdb := redisClient(tb)
	ctx := context.Background()
	key := "asynq:{" + queue + "}:lease"
	ids, err := rdb.ZRange(ctx, key, 0, -1).Result()
	if err != nil {
		tb.Fatalf("list leases: %v", err)
	}
	if len(ids) == 0 {
		tb.Fatalf("no task holds a lease in queue %s", queue)
	}
	past := float64(time.Now().Add(-5 * time.Minute).Unix())
	for _, id := range ids {
		if err := rdb.ZAddXX(ctx, key, redis.Z{Score: past, Member: id}).Err(); err != nil {
			tb.Fatalf("age lease: %v", err)
		}
	}
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

func TestConformance(t *testing.T) {
	h := harness
	if os.Getenv("SVC_TEST_REAL_LEASE") != "" {
		h.ExpireLeases = nil // wait for asynq's own lease and recoverer: one to two minutes
	}
	queuetest.Run(t, h)
}

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
