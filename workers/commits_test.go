package workers

import (
	"testing"
	"time"

	"svc/builder"
)

func TestCommitCache(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewCommitCache(2, time.Minute)
	c.now = func() time.Time { return now }
	key := func(commit string) commitKey { return commitKey{"ag", "file:///r", "main", commit} }
	a, b, cc, d := &builder.GitCommit{}, &builder.GitCommit{}, &builder.GitCommit{}, &builder.GitCommit{}

	c.put(key("a"), a)
	if got, ok := c.take(key("a")); !ok || got != a {
		t.Fatalf("take(a) = %p, %v; want %p", got, ok, a)
	}
	if _, ok := c.take(key("a")); ok {
		t.Fatal("a commit was taken twice")
	}
	// Another agent, URL or branch is another key.
	c.put(key("b"), b)
	if _, ok := c.take(commitKey{"other", "file:///r", "main", "b"}); ok {
		t.Fatal("another agent took the commit")
	}
	// Capacity 2: a third entry drops the oldest.
	c.put(key("c"), cc)
	c.put(key("d"), d)
	if _, ok := c.take(key("b")); ok || c.Len() != 2 {
		t.Fatalf("oldest entry kept beyond capacity (%d entries)", c.Len())
	}
	// Entries older than the TTL are dropped.
	now = now.Add(time.Minute + time.Second)
	if c.Len() != 0 {
		t.Fatalf("%d entries past their TTL", c.Len())
	}
	// A nil cache keeps nothing.
	var none *CommitCache
	none.put(key("a"), a)
	if _, ok := none.take(key("a")); ok || none.Len() != 0 {
		t.Fatal("nil cache kept a commit")
	}
}
