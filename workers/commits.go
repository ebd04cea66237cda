package workers

import (
	"slices"
	"sync"
	"time"

	"svc/builder"
)

// CommitCache hands the commit a push's branch filter fetched to the build of that push, so that
// a process that answers webhooks and runs builds (svc up) fetches each pushed commit once. An
// entry is taken once; entries older than the TTL, or beyond the capacity (oldest first), are
// dropped (expiry runs on each use, so a commit may outlive its TTL until the next push or build
// touches the cache). A nil *CommitCache keeps nothing.
type CommitCache struct {
	mu      sync.Mutex
	max     int
	ttl     time.Duration
	now     func() time.Time
	entries []commitEntry // oldest first
}

type commitKey struct{ agentID, url, branch, commit string }

// keyOf is the key of src's commit on branch.
func keyOf(src AgentSource, branch, commit string) commitKey {
	return commitKey{src.AgentID, src.URL, branch, commit}
}

type commitEntry struct {
	key    commitKey
	commit *builder.GitCommit
	at     time.Time
}

// NewCommitCache returns a cache of at most max commits, each kept at most ttl.
func NewCommitCache(max int, ttl time.Duration) *CommitCache {
	return &CommitCache{max: max, ttl: ttl, now: time.Now}
}

// Put keeps fetched, the commit hash of src's repository fetched on branch, for the build of
// that commit.
func (c *CommitCache) Put(src AgentSource, branch, hash string, fetched *builder.GitCommit) {
	c.put(keyOf(src, branch, hash), fetched)
}

// Take returns and forgets the commit hash of src's repository kept for branch, if any.
func (c *CommitCache) Take(src AgentSource, branch, hash string) (*builder.GitCommit, bool) {
	return c.take(keyOf(src, branch, hash))
}

func (c *CommitCache) put(k commitKey, commit *builder.GitCommit) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	if len(c.entries) >= c.max {
		c.entries = slices.Delete(c.entries, 0, 1)
	}
	c.entries = append(c.entries, commitEntry{key: k, commit: commit, at: c.now()})
}

func (c *CommitCache) take(k commitKey) (*builder.GitCommit, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	for i, e := range c.entries {
		if e.key == k {
			c.entries = slices.Delete(c.entries, i, i+1) // clears the freed slot: the commit can go
			return e.commit, true
		}
	}
	return nil, false
}

// Len is the number of commits kept.
func (c *CommitCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	return len(c.entries)
}

func (c *CommitCache) expireLocked() {
	cutoff := c.now().Add(-c.ttl)
	n := 0
	for n < len(c.entries) && c.entries[n].at.Before(cutoff) {
		n++
	}
	if n > 0 {
		c.entries = slices.Delete(c.entries, 0, n)
	}
}
