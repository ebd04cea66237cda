package registry_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/registry"
)

// A cursor reads back as itself, and nothing else reads as a cursor.
func TestCursorString(t *testing.T) {
	c := registry.Cursor{List: registry.CursorRuns, AgentID: "ag_1", At: time.Date(2026, 11, 25, 12, 0, 1, 1500, time.UTC), ID: "run_1"}
	got, err := registry.ParseCursor(c.String())
	if err != nil || got != c {
		t.Errorf("ParseCursor(String()) = %+v, %v, want %+v", got, err, c)
	}
	if s := (registry.Cursor{}).String(); s != "" {
		t.Errorf("zero Cursor = %q, want empty", s)
	}
	if strings.ContainsAny(c.String(), "+/=&?%") {
		t.Errorf("cursor %q needs escaping in a query string", c.String())
	}
	for _, s := range []string{"", "run_1", "not base64!", "e30", // {}
		"eyJsIjoicnVucyIsImEiOiJhZ18xIiwidCI6IjIwMjYtMTEtMjVUMTI6MDA6MDFaIn0", // no id
		c.String() + "x"} {
		if _, err := registry.ParseCursor(s); !errors.Is(err, registry.ErrBadCursor) {
			t.Errorf("ParseCursor(%q) = %v, want ErrBadCursor", s, err)
		}
	}
}

// pageItem is one item of a paged list in testPages: an id, a time after the test's base time,
// the agent it belongs to and the metadata key userId that the test filters on.
type pageItem struct {
	id    string
	at    time.Duration
	agent string
	user  string
}

// pageLister lists a page of agent's items whose userId is user, after before.
type pageLister func(agent, user string, before registry.Cursor, limit int) ([]string, registry.Cursor, error)

// testPages checks keyset paging of one list: add stores an item, list reads a page. Seven items
// match a filter, several of them at the same time, among items that do not match and another
// agent's items at the same times; pages of 3 hold them all once, in (time, id) order newest
// first, with a next cursor on every page but the last; items added between pages ahead of the
// cursor (newer, or of the cursor's time with a greater id) are not in later pages; and the
// cursor pages nothing of another agent.
func testPages(t *testing.T, list string, add func(base time.Time, it pageItem), page pageLister) {
	t.Helper()
	base := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, it := range []pageItem{
		{"x2", 0, "a1", "u1"},
		{"x5", time.Second, "a1", "u1"},
		{"y1", time.Second, "a1", "u2"}, // filtered out
		{"x1", time.Second, "a1", "u1"},
		{"x3", 2 * time.Second, "a1", "u1"},
		{"z1", time.Second, "a2", "u1"}, // another agent's
		{"x7", time.Second + 1500*time.Microsecond, "a1", "u1"},
		{"x4", time.Second, "a1", "u1"},
		{"y2", 0, "a1", "u2"},
		{"x6", 0, "a1", "u1"},
	} {
		add(base, it)
	}
	want := [][]string{{"x3", "x7", "x5"}, {"x4", "x1", "x6"}, {"x2"}}

	var got [][]string
	var before registry.Cursor
	for i := range 10 {
		ids, next, err := page("a1", "u1", before, 3)
		if err != nil {
			t.Fatalf("page %d: %v", i+1, err)
		}
		got = append(got, ids)
		if next.IsZero() {
			break
		}
		if next.List != list || next.AgentID != "a1" {
			t.Errorf("page %d: next %+v, want a cursor of %s of a1", i+1, next, list)
		}
		if i == 0 {
			// Items that sort ahead of the cursor, added between pages, are not in later pages.
			add(base, pageItem{"x0", 3 * time.Second, "a1", "u1"})
			add(base, pageItem{"x9", time.Second, "a1", "u1"}) // the cursor's time, a greater id
			// Another agent may not use the cursor.
			if _, _, err := page("a2", "u1", next, 3); !errors.Is(err, registry.ErrBadCursor) {
				t.Errorf("a1's cursor on a2's %s: %v, want ErrBadCursor", list, err)
			}
			// Nor another list of the same agent.
			other := next
			other.List = list + "-other"
			if _, _, err := page("a1", "u1", other, 3); !errors.Is(err, registry.ErrBadCursor) {
				t.Errorf("a cursor of another list on %s: %v, want ErrBadCursor", list, err)
			}
		}
		before = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages of 3 (-want +got):\n%s", diff)
	}

	// From the start again: the added items lead; a page that holds the rest has no next.
	ids, next, err := page("a1", "u1", registry.Cursor{}, 9)
	if err != nil {
		t.Fatal(err)
	}
	if w := append([]string{"x0", "x3", "x7", "x9"}, slices.Concat(want...)[2:]...); !slices.Equal(ids, w) || !next.IsZero() {
		t.Errorf("one page of 9 = %v, next %+v; want %v and no next", ids, next, w)
	}
	if ids, next, err := page("a1", "", registry.Cursor{}, 0); err != nil || len(ids) != 11 || !next.IsZero() {
		t.Errorf("unfiltered, default limit = %v, %+v, %v; want 11 items, no next", ids, next, err)
	}
}
