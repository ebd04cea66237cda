package dbtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisURL is the server tests use when SVC_TEST_REDIS_URL is unset.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// RedisURL is the test Redis: SVC_TEST_REDIS_URL, or DefaultRedisURL.
func RedisURL() string {
	if u := os.Getenv("SVC_TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultRedisURL
}

// Redis connects to the test Redis, closed when tb ends; when it cannot be reached the test fails
// under CI and is skipped otherwise (Missing). Tests share the server: give keys a prefix of
// their own.
func Redis(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		tb.Fatalf("SVC_TEST_REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() }) // a failed close leaves nothing to undo
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		Missing(tb, "Redis at "+opt.Addr, err)
	}
	return rdb
}
