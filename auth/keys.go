package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// KeyUsedInterval is how often a Keys writes when each key was last used: lastUsedAt is at most
// this late, and each key is written at most once per interval.
const KeyUsedInterval = time.Minute

// revocationSlack widens each poll of revoked keys backwards, so that a revocation stamped by a
// clock a little behind this process's is still seen.
const revocationSlack = time.Minute

// maxUnknownKeys bounds the negative cache of unknown ak_ values; past it the cache starts over.
const maxUnknownKeys = 10000

// ErrKeyNotFound is what a KeyStore returns for a hash no key has.
var ErrKeyNotFound = errors.New("auth: api key not found")

// AgentKey is an ak_ agent API key as a verified credential: its id and the agent it belongs to.
type AgentKey struct {
	ID      string
	AgentID string
}

// StoredKey is an ak_ key as its store has it.
type StoredKey struct {
	AgentKey
	Revoked bool
}

// KeyStore is where agent API keys are kept: registry.APIKeys. Every method must be safe for
// concurrent use and return an error when ctx is done.
//   - KeyByHash returns the key whose value hashes to hash (Hash), revoked or not, or
//     ErrKeyNotFound.
//   - RevokedKeysSince returns the ids of the keys revoked at or after since.
//   - MarkKeysUsed records when each key (by id) was last used; an unknown id is ignored.
type KeyStore interface {
	KeyByHash(ctx context.Context, hash string) (StoredKey, error)
	RevokedKeysSince(ctx context.Context, since time.Time) ([]string, error)
	MarkKeysUsed(ctx context.Context, used map[string]time.Time) error
}

// Keys checks ak_ agent API keys without a database read per request: each key is looked up
// once by its hash and kept, the keys revoked lately are polled every refresh interval (Run), so
// a revoked key is refused by every process within that interval, and when each key was last
// used is written in batches off the request path, once per KeyUsedInterval. Unknown values are
// remembered for one refresh interval, so a flood of bad keys does not become a flood of reads.
// A Keys is safe for concurrent use.
type Keys struct {
	store    KeyStore
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex
	known    map[string]StoredKey // by hash
	unknown  map[string]time.Time // by hash: until when it is known to be unknown
	revoked  map[string]bool      // ids revoked since this process started
	used     map[string]time.Time // by id, not yet written
	lastPoll time.Time
}

// KeysParams configure NewKeys. Zero values are the documented defaults.
type KeysParams struct {
	// Store keeps the keys. Required.
	Store KeyStore
	// Interval is how often revoked keys are polled; 0 means DefaultRevocationRefresh.
	Interval time.Duration
	// Logger receives failed polls and writes; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// NewKeys returns a key checker over p.Store. Call Refresh once before serving and Run for the
// rest.
func NewKeys(p KeysParams) *Keys {
	k := &Keys{store: p.Store, interval: p.Interval, log: p.Logger, now: p.Now,
		known: map[string]StoredKey{}, unknown: map[string]time.Time{}, revoked: map[string]bool{}, used: map[string]time.Time{}}
	if k.interval <= 0 {
		k.interval = DefaultRevocationRefresh
	}
	if k.log == nil {
		k.log = slog.Default()
	}
	if k.now == nil {
		k.now = time.Now
	}
	return k
}

// Check verifies the ak_ value and returns its key; an unknown, revoked or malformed value is
// ErrUnauthenticated, a failure of the store another error. It records the use for lastUsedAt.
func (k *Keys) Check(ctx context.Context, value string) (AgentKey, error) {
	if !strings.HasPrefix(value, AgentKeyPrefix) {
		return AgentKey{}, ErrUnauthenticated
	}
	hash, now := Hash(value), k.now()
	k.mu.Lock()
	sk, ok := k.known[hash]
	if !ok {
		if until, bad := k.unknown[hash]; bad && now.Before(until) {
			k.mu.Unlock()
			return AgentKey{}, ErrUnauthenticated
		}
	}
	k.mu.Unlock()
	if !ok {
		var err error
		if sk, err = k.lookup(ctx, hash, now); err != nil {
			return AgentKey{}, err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if sk.Revoked || k.revoked[sk.ID] {
		return AgentKey{}, ErrUnauthenticated
	}
	k.used[sk.ID] = now
	return sk.AgentKey, nil
}

// lookup reads the key of hash from the store and caches the answer.
func (k *Keys) lookup(ctx context.Context, hash string, now time.Time) (StoredKey, error) {
	sk, err := k.store.KeyByHash(ctx, hash)
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case errors.Is(err, ErrKeyNotFound):
		if len(k.unknown) >= maxUnknownKeys {
			k.unknown = map[string]time.Time{}
		}
		k.unknown[hash] = now.Add(k.interval)
		return StoredKey{}, ErrUnauthenticated
	case err != nil:
		return StoredKey{}, fmt.Errorf("look up api key: %w", err)
	}
	k.known[hash] = sk
	return sk, nil
}

// Refresh reads the keys revoked since the last refresh (with a minute's slack for clocks) and
// refuses them from now on.
func (k *Keys) Refresh(ctx context.Context) error {
	start := k.now()
	k.mu.Lock()
	since := k.lastPoll
	k.mu.Unlock()
	if since.IsZero() {
		since = start
	}
	ids, err := k.store.RevokedKeysSince(ctx, since.Add(-revocationSlack))
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range ids {
		k.revoked[id] = true
	}
	k.lastPoll = start
	return nil
}

// Flush writes the uses recorded since the last flush.
func (k *Keys) Flush(ctx context.Context) error {
	k.mu.Lock()
	used := k.used
	k.used = map[string]time.Time{}
	k.mu.Unlock()
	if len(used) == 0 {
		return nil
	}
	if err := k.store.MarkKeysUsed(ctx, used); err != nil {
		return fmt.Errorf("write api keys' last use: %w", err)
	}
	return nil
}

// Run refreshes the revoked keys every interval and flushes the uses every KeyUsedInterval
// until ctx is done, then flushes once more (within 5 seconds). Failures are logged and the
// next tick tries again. It returns nil when ctx ends.
func (k *Keys) Run(ctx context.Context) error {
	poll, flush := time.NewTicker(k.interval), time.NewTicker(KeyUsedInterval)
	defer poll.Stop()
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := k.Flush(fctx); err != nil {
				k.log.WarnContext(ctx, "write api keys' last use", "err", err)
			}
			return nil
		case <-poll.C:
			if err := k.Refresh(ctx); err != nil && ctx.Err() == nil {
				k.log.WarnContext(ctx, "refresh revoked api keys", "err", err)
			}
		case <-flush.C:
			if err := k.Flush(ctx); err != nil && ctx.Err() == nil {
				k.log.WarnContext(ctx, "write api keys' last use", "err", err)
			}
		}
	}
}
