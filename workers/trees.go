package workers

import (
	"io/fs"
	"slices"
	"sync"
	"time"

	"svc/builder"
)

// TreeCache hands the tree a push's branch filter fetched to the build of that push, so that a
// process that answers webhooks and runs builds (svc up) fetches each pushed commit once. An
// entry is taken once; entries older than the TTL, or beyond the capacity (oldest first), are
// dropped (expiry runs on each use, so a tree may outlive its TTL until the next push or build
// touches the cache). A nil *TreeCache keeps nothing.
type TreeCache struct {
	mu      sync.Mutex
	max     int
	ttl     time.Duration
	now     func() time.Time
	entries []treeEntry // oldest first
}

type treeKey struct{ agentID, url, branch, commit string }

// treeKey is the key of src's tree of commit on branch.
func (src AgentSource) treeKey(branch, commit string) treeKey {
	return treeKey{src.AgentID, src.URL, branch, commit}
}

type treeEntry struct {
	key  treeKey
	tree fs.FS
	res  builder.FetchResult
	at   time.Time
}

// NewTreeCache returns a cache of at most max trees, each kept at most ttl.
func NewTreeCache(max int, ttl time.Duration) *TreeCache {
	return &TreeCache{max: max, ttl: ttl, now: time.Now}
}

// put keeps a fetched tree for the build of the same commit.
func (c *TreeCache) put(k treeKey, tree fs.FS, res builder.FetchResult) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	if len(c.entries) >= c.max {
		c.entries = slices.Delete(c.entries, 0, 1)
	}
	c.entries = append(c.entries, treeEntry{key: k, tree: tree, res: res, at: c.now()})
}

// take returns and forgets the tree kept for k, if any.
func (c *TreeCache) take(k treeKey) (fs.FS, builder.FetchResult, bool) {
	if c == nil {
		return nil, builder.FetchResult{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	for i, e := range c.entries {
		if e.key == k {
			c.entries = slices.Delete(c.entries, i, i+1) // clears the freed slot: the tree can go
			return e.tree, e.res, true
		}
	}
	return nil, builder.FetchResult{}, false
}

// Len is the number of trees kept.
func (c *TreeCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	return len(c.entries)
}

func (c *TreeCache) expireLocked() {
	cutoff := c.now().Add(-c.ttl)
	n := 0
	for n < len(c.entries) && c.entries[n].at.Before(cutoff) {
		n++
	}
	if n > 0 {
		c.entries = slices.Delete(c.entries, 0, n)
	}
}
