package redislock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/migrations/dbtest"
	"svc/runner/sessions"
	"svc/runner/sessions/redislock"
)

func newRedis(t *testing.T) redis.UniversalClient { return dbtest.Redis(t) }

func prefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "svc:test:" + hex.EncodeToString(b[:]) + ":"
}

func TestOneTurnAcrossRunners(t *testing.T) {
	rdb := newRedis(t)
	p := prefix()
	a, b := redislock.New(rdb, redislock.Config{Prefix: p}), redislock.New(rdb, redislock.Config{Prefix: p})
	ctx := context.Background()
	release, err := a.TryLock(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "s1"); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("second runner's TryLock = %v, want ErrLocked", err)
	}
	other, err := b.TryLock(ctx, "s2")
	if err != nil {
		t.Fatalf("another session: %v", err)
	}
	other()
	release()
	release() // safe twice
	again, err := b.TryLock(ctx, "s1")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}

func TestRenewalKeepsALongTurn(t *testing.T) {
	rdb := newRedis(t)
	p := prefix()
	l := redislock.New(rdb, redislock.Config{Prefix: p, TTL: time.Second})
	ctx := context.Background()
	release, err := l.TryLock(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// Wait well past the TTL by observing the key, not the clock: it must still be there.
	for range 3 {
		time.Sleep(600 * time.Millisecond)
		if n, err := rdb.Exists(ctx, p+"long").Result(); err != nil || n != 1 {
			t.Fatalf("lock key gone during a running turn: %d, %v", n, err)
		}
	}
	if _, err := l.TryLock(ctx, "long"); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("TryLock during the turn = %v", err)
	}
}

func TestExpiredLockIsNotReleasedByItsFormerOwner(t *testing.T) {
	rdb := newRedis(t)
	p := prefix()
	l := redislock.New(rdb, redislock.Config{Prefix: p})
	ctx := context.Background()
	release, err := l.TryLock(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	// The runner is presumed dead: its key expires and another runner takes the session.
	rdb.Del(ctx, p+"s")
	other, err := l.TryLock(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	release() // the former owner's release must not free the new owner's lock
	if _, err := l.TryLock(ctx, "s"); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("the former owner released the new lock: %v", err)
	}
	other()
}

func TestConcurrentTryLock(t *testing.T) {
	rdb := newRedis(t)
	l := redislock.New(rdb, redislock.Config{Prefix: prefix()})
	var won atomic.Int32
	var wg sync.WaitGroup
	var mu sync.Mutex
	var releases []func()
	for range 16 {
		wg.Go(func() {
			if release, err := l.TryLock(context.Background(), "hot"); err == nil {
				won.Add(1)
				mu.Lock()
				releases = append(releases, release)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, r := range releases {
		r()
	}
	if won.Load() != 1 {
		t.Fatalf("%d of 16 concurrent TryLocks won, want 1", won.Load())
	}
}

// TestLostLockIsReported: a lock whose key another runner took (or that expired) is reported
// lost at the next renewal, and release then leaves the new owner's lock alone.
func TestLostLockIsReported(t *testing.T) {
	rdb := newRedis(t)
	p := prefix()
	l := redislock.New(rdb, redislock.Config{Prefix: p, TTL: time.Second})
	ctx := context.Background()
	release, lost, err := l.TryLockWatch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	select {
	case <-lost:
		t.Fatal("a held lock was reported lost")
	case <-time.After(500 * time.Millisecond): // more than one renewal
	}
	rdb.Set(ctx, p+"s", "another runner's token", time.Minute)
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("a lock taken by another runner was not reported lost")
	}
	release()
	if v := rdb.Get(ctx, p+"s").Val(); v != "another runner's token" {
		t.Errorf("release after the loss touched the new owner's key: %q", v)
	}
}
