package live_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/live"
	"svc/runner/sessions/memstore"
)

// eachStore runs fn over the in-memory store and the database store on SQLite and Postgres.
func eachStore(t *testing.T, fn func(t *testing.T, store sessions.Store)) {
	t.Run("memstore", func(t *testing.T) { fn(t, memstore.New()) })
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) { fn(t, dbstore.New(db)) })
}

var base = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// stored saves a session of agent ag1 with one message and returns its id.
func stored(t *testing.T, store sessions.Store, id, agentID string) string {
	t.Helper()
	s := &sessions.Session{ID: id, AgentID: agentID, Status: sessions.StatusIdle, CreatedAt: base, UpdatedAt: base,
		Messages: []sessions.Entry{{Message: models.Message{Role: models.RoleUser, Content: "hi"}, At: base}}}
	if err := store.Save(context.Background(), s, 0); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestConcurrentGetSharesOneCopy: many requests for one stored session at once get one live
// copy, and a session of another agent is never handed out.
func TestConcurrentGetSharesOneCopy(t *testing.T) {
	eachStore(t, func(t *testing.T, store sessions.Store) {
		c := live.New(live.Config{Store: store, AgentID: "ag1"})
		id := stored(t, store, "s1", "ag1")
		stored(t, store, "theirs", "ag2")
		got := make([]*live.Session, 16)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				l, err := c.Lookup(context.Background(), id)
				if err != nil {
					t.Error(err)
				}
				got[i] = l
			})
		}
		wg.Wait()
		for _, l := range got {
			if l != got[0] {
				t.Fatal("concurrent lookups of one session got different live copies")
			}
		}
		if _, err := c.Lookup(context.Background(), "theirs"); !errors.Is(err, live.ErrOtherAgent) {
			t.Errorf("Lookup of another agent's session = %v, want ErrOtherAgent", err)
		}
		if _, err := c.Lookup(context.Background(), "none"); !errors.Is(err, sessions.ErrNotFound) {
			t.Errorf("Lookup of a missing session = %v, want ErrNotFound", err)
		}
	})
}

// TestConcurrentPersistKeepsEveryEntry: entries appended and persisted from many goroutines at
// once all reach the store, in the order they were appended.
func TestConcurrentPersistKeepsEveryEntry(t *testing.T) {
	eachStore(t, func(t *testing.T, store sessions.Store) {
		ctx := context.Background()
		c := live.New(live.Config{Store: store, AgentID: "ag1"})
		l, err := c.Lookup(ctx, stored(t, store, "s1", "ag1"))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				l.Lock()
				l.S.Messages = append(l.S.Messages, sessions.Entry{Message: models.Message{Role: models.RoleUser, Content: fmt.Sprint(i)}, At: base})
				l.Unlock()
				if err := c.Persist(ctx, l); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		s, err := store.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		l.Lock()
		defer l.Unlock()
		if len(s.Messages) != 13 || l.Stored != 13 {
			t.Fatalf("store holds %d messages, the live copy says %d stored; want 13", len(s.Messages), l.Stored)
		}
		for i := range s.Messages {
			if s.Messages[i].Content != l.S.Messages[i].Content {
				t.Fatalf("message %d is %q in the store, %q live", i, s.Messages[i].Content, l.S.Messages[i].Content)
			}
		}
	})
}

// TestUpdateIsNeverUndoneByRefresh: over a shared store, refreshes racing updates never put back
// a stored state without an update that was made (the save lock holds each change with its save).
func TestUpdateIsNeverUndoneByRefresh(t *testing.T) {
	eachStore(t, func(t *testing.T, store sessions.Store) {
		ctx := context.Background()
		c := live.New(live.Config{Store: store, AgentID: "ag1", Shared: true})
		l, err := c.Lookup(ctx, stored(t, store, "s1", "ag1"))
		if err != nil {
			t.Fatal(err)
		}
		const n = 20
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range n {
				if err := c.Update(ctx, l, func(s *sessions.Session) error {
					if s.Metadata == nil {
						s.Metadata = map[string]string{}
					}
					s.Metadata[fmt.Sprint("k", i)] = "v"
					return nil
				}); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Go(func() {
			for range 2 * n {
				if err := c.Refresh(ctx, l); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Wait()
		s, err := store.Load(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Metadata) != n {
			t.Fatalf("the store holds %d of %d keys: a refresh undid an update", len(s.Metadata), n)
		}
		l.Lock()
		defer l.Unlock()
		if len(l.S.Metadata) != n {
			t.Fatalf("the live copy holds %d of %d keys", len(l.S.Metadata), n)
		}
	})
}

// TestEvictionAndDone: idle sessions are evicted after the idle time unless a turn runs; Done
// drops an idle stored session over a shared or in-memory store, and keeps it otherwise.
func TestEvictionAndDone(t *testing.T) {
	eachStore(t, func(t *testing.T, store sessions.Store) {
		ctx := context.Background()
		now := base
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		c := live.New(live.Config{Store: store, AgentID: "ag1", Idle: time.Minute, Now: clock})
		busy, err := c.Lookup(ctx, stored(t, store, "busy", "ag1"))
		if err != nil {
			t.Fatal(err)
		}
		busy.Lock()
		busy.Turn = loop.NewQueue()
		busy.Unlock()
		if _, err := c.Lookup(ctx, stored(t, store, "idle", "ag1")); err != nil {
			t.Fatal(err)
		}
		c.Insert(c.NewSession(&sessions.Session{ID: "prepared", AgentID: "ag1"}, false))
		if n := c.EvictIdle(); n != 0 {
			t.Fatalf("evicted %d before the idle time", n)
		}
		mu.Lock()
		now = now.Add(2 * time.Minute)
		mu.Unlock()
		if n := c.EvictIdle(); n != 2 || c.Len() != 1 {
			t.Fatalf("evicted %d, %d left; want the idle and the prepared one, the busy one left", n, c.Len())
		}

		_, inMemory := store.(sessions.InMemory)
		idle, err := c.Lookup(ctx, "idle")
		if err != nil {
			t.Fatal(err)
		}
		c.Done(idle)
		if kept := c.Len() == 2; kept == inMemory {
			t.Errorf("Done over %T kept the idle session: %v", store, kept)
		}
		shared := live.New(live.Config{Store: store, AgentID: "ag1", Shared: true})
		l, err := shared.Lookup(ctx, "idle")
		if err != nil {
			t.Fatal(err)
		}
		shared.Done(l)
		if shared.Len() != 0 {
			t.Error("Done over a shared store kept the idle session")
		}
	})
}

// TestStorm runs every operation at once on a few sessions, for the race detector.
func TestStorm(t *testing.T) {
	eachStore(t, func(t *testing.T, store sessions.Store) {
		ctx := context.Background()
		c := live.New(live.Config{Store: store, AgentID: "ag1", Shared: true, Idle: time.Nanosecond})
		for i := range 3 {
			stored(t, store, fmt.Sprint("s", i), "ag1")
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 10 {
					id := fmt.Sprint("s", (g+i)%3)
					l, err := c.Lookup(ctx, id)
					if err != nil {
						t.Error(err)
						return
					}
					switch i % 4 {
					case 0:
						_ = c.Refresh(ctx, l)
					case 1:
						_ = c.Update(ctx, l, func(s *sessions.Session) error { s.Title = fmt.Sprint(g, i); return nil })
					case 2:
						c.EvictIdle()
					case 3:
						c.Done(l)
					}
				}
			})
		}
		wg.Wait()
	})
}

// TestLatest: over a shared store, a copy live here is brought up to date, and a prepared copy
// gives way to the session of its id that another runtime stored: the stored one wins. Over an
// unshared store the live copy is the session.
func TestLatest(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	here := live.New(live.Config{Store: store, AgentID: "ag1", Shared: true})
	prepared := here.Insert(here.NewSession(&sessions.Session{ID: "p1", AgentID: "ag1", Title: "prepared"}, false))
	stored(t, store, "p1", "ag1") // another runtime ran the first turn
	l, err := here.Latest(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if l == prepared || len(l.S.Messages) != 1 || !l.Persisted {
		t.Fatalf("Latest kept the prepared copy (%d messages, persisted %v), want the stored session", len(l.S.Messages), l.Persisted)
	}

	held, err := here.Lookup(ctx, stored(t, store, "s1", "ag1")) // live here: another request holds it
	if err != nil {
		t.Fatal(err)
	}
	s, _ := store.Load(ctx, "s1")
	s.Messages = append(s.Messages, sessions.Entry{Message: models.Message{Role: models.RoleAssistant, Content: "hello"}, At: base})
	if err := store.Save(ctx, s, 1); err != nil {
		t.Fatal(err)
	}
	if l, err := here.Latest(ctx, "s1"); err != nil || l != held || len(l.S.Messages) != 2 {
		t.Fatalf("Latest = %v, %v; want the live copy refreshed to 2 messages", l, err)
	}

	alone := live.New(live.Config{Store: store, AgentID: "ag1"})
	mine := alone.Insert(alone.NewSession(&sessions.Session{ID: "p1", AgentID: "ag1"}, false))
	if l, err := alone.Latest(ctx, "p1"); err != nil || l != mine {
		t.Fatalf("unshared Latest = %v, %v; want the live copy", l, err)
	}
}
