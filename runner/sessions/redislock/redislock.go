// Package redislock is a sessions.Locker shared by every runner process: one turn at a time per
// session across the whole fleet, held in Redis.
//
// A lock is a key set with NX and a time to live, renewed while the turn runs; a runner that dies
// loses its locks when they expire, so a session is never locked forever. Release deletes the key
// only when it still holds this turn's token.
package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/runner/sessions"
)

// DefaultTTL is how long a lock outlives a runner that stopped renewing it: how long a session
// whose runner died refuses a turn on another runner (409 turn_in_progress). Renewed every
// TTL/3 (2 s), a lock survives a Redis hiccup of up to 6 s.
const DefaultTTL = 6 * time.Second

// Locker takes session locks in Redis. It is safe for concurrent use.
type Locker struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
	log    *slog.Logger
}

var (
	_ sessions.Locker  = (*Locker)(nil)
	_ sessions.Watcher = (*Locker)(nil)
)

// Config configures a Locker. Zero values take the documented defaults.
type Config struct {
	// Prefix starts every key (default "svc:turnlock:").
	Prefix string
	// TTL is the lock's lifetime without renewal (default DefaultTTL, at least 1s).
	TTL time.Duration
	// Logger receives renewal failures (default slog.Default()).
	Logger *slog.Logger
}

// New returns a Locker over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Locker {
	if cfg.Prefix == "" {
		cfg.Prefix = "svc:turnlock:"
	}
	if cfg.TTL < time.Second {
		cfg.TTL = DefaultTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Locker{rdb: rdb, prefix: cfg.Prefix, ttl: cfg.TTL, log: cfg.Logger}
}

// release deletes the key only while it holds our token.
var release = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// renew extends the key only while it holds our token.
var renew = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`)

// TryLock implements sessions.Locker. The lock is renewed every TTL/3 until release is called.
func (l *Locker) TryLock(ctx context.Context, id string) (func(), error) {
	release, _, err := l.TryLockWatch(ctx, id)
	return release, err
}

// TryLockWatch implements sessions.Watcher: lost is closed when a renewal finds the key gone or
// another runner's, or when no renewal has succeeded for a whole TTL (the key has expired).
func (l *Locker) TryLockWatch(ctx context.Context, id string) (func(), <-chan struct{}, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	token := hex.EncodeToString(b[:])
	key := l.prefix + id
	ok, err := l.rdb.SetNX(ctx, key, token, l.ttl).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("redislock: lock %s: %w", id, err)
	}
	if !ok {
		return nil, nil, sessions.ErrLocked
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	lost := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(l.ttl / 3)
		defer tick.Stop()
		renewed := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
				n, err := renew.Run(rctx, l.rdb, []string{key}, token, l.ttl.Milliseconds()).Int()
				cancel()
				switch {
				case err == nil && n == 0:
					l.log.Warn("session lock lost", "session_id", id)
					close(lost)
					return
				case err == nil:
					renewed = time.Now()
				case time.Since(renewed) >= l.ttl:
					l.log.Warn("session lock lost: not renewed for its whole time to live", "session_id", id, "err", err)
					close(lost)
					return
				default:
					l.log.Warn("renew session lock", "session_id", id, "err", err)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := release.Run(rctx, l.rdb, []string{key}, token).Err(); err != nil && !errors.Is(err, redis.Nil) {
				l.log.Warn("release session lock", "session_id", id, "err", err)
			}
		})
	}, lost, nil
}
