package workers

import (
	"testing"
	"testing/fstest"
	"time"

	"svc/builder"
)

func TestTreeCache(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewTreeCache(2, time.Minute)
	c.now = func() time.Time { return now }
	key := func(commit string) treeKey { return treeKey{"ag", "file:///r", "main", commit} }
	tree := fstest.MapFS{"svc.json": {Data: []byte("{}")}}

	c.put(key("a"), tree, builder.FetchResult{Commit: "a"})
	if _, res, ok := c.take(key("a")); !ok || res.Commit != "a" {
		t.Fatalf("take(a) = %+v, %v", res, ok)
	}
	if _, _, ok := c.take(key("a")); ok {
		t.Fatal("a tree was taken twice")
	}
	// Another agent, URL or branch is another key.
	c.put(key("b"), tree, builder.FetchResult{Commit: "b"})
	if _, _, ok := c.take(treeKey{"other", "file:///r", "main", "b"}); ok {
		t.Fatal("another agent took the tree")
	}
	// Capacity 2: a third entry drops the oldest.
	c.put(key("c"), tree, builder.FetchResult{Commit: "c"})
	c.put(key("d"), tree, builder.FetchResult{Commit: "d"})
	if _, _, ok := c.take(key("b")); ok || c.Len() != 2 {
		t.Fatalf("oldest entry kept beyond capacity (%d entries)", c.Len())
	}
	// Entries older than the TTL are dropped.
	now = now.Add(time.Minute + time.Second)
	if c.Len() != 0 {
		t.Fatalf("%d entries past their TTL", c.Len())
	}
	// A nil cache keeps nothing.
	var none *TreeCache
	none.put(key("a"), tree, builder.FetchResult{})
	if _, _, ok := none.take(key("a")); ok || none.Len() != 0 {
		t.Fatal("nil cache kept a tree")
	}
}
