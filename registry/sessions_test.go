package registry_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
)

// The platform lists an agent's sessions as the runtimes stored them, filtered by metadata.
func TestSessions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		store := dbstore.New(db)
		at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
		for i, s := range []*sessions.Session{
			{ID: "s1", AgentID: "a1", Title: "one", Metadata: map[string]string{"userId": "u1", "screen": "home"}},
			{ID: "s2", AgentID: "a1", Title: "two", Metadata: map[string]string{"userId": "u2", "screen": "home"}},
			{ID: "s3", AgentID: "a2", Title: "other agent", Metadata: map[string]string{"userId": "u1"}},
		} {
			s.Status, s.CreatedAt, s.UpdatedAt = sessions.StatusIdle, at, at.Add(time.Duration(i)*time.Minute)
			if err := store.Save(ctx, s, 0); err != nil {
				t.Fatal(err)
			}
		}
		list := func(q registry.SessionQuery) string {
			t.Helper()
			ss, err := registry.NewSessions(db).List(ctx, "a1", q)
			if err != nil {
				t.Fatal(err)
			}
			out := ""
			for _, s := range ss {
				out += s.ID + " "
			}
			return out
		}
		for want, q := range map[string]registry.SessionQuery{
			"s2 s1 ": {},
			"s1 ":    {Metadata: map[string]string{"userId": "u1"}},
			"s2 ":    {Metadata: map[string]string{"screen": "home", "userId": "u2"}},
			"":       {Metadata: map[string]string{"screen": "cart"}},
		} {
			if got := list(q); got != want {
				t.Errorf("%+v: %q, want %q", q, got, want)
			}
		}
	})
}

// The sessions list pages by (updatedAt, id), newest first.
func TestSessionPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		store, list := dbstore.New(db), registry.NewSessions(db)
		testPages(t, registry.CursorSessions, func(base time.Time, it pageItem) {
			s := &sessions.Session{ID: it.id, AgentID: it.agent, Status: sessions.StatusIdle, Metadata: map[string]string{"userId": it.user},
				CreatedAt: base, UpdatedAt: base.Add(it.at)}
			if err := store.Save(ctx, s, 0); err != nil {
				t.Fatal(err)
			}
		}, func(agent, user string, before registry.Cursor, limit int) ([]string, registry.Cursor, error) {
			q := registry.SessionQuery{Before: before, Limit: limit, Metadata: map[string]string{}}
			if user != "" {
				q.Metadata["userId"] = user
			}
			ss, next, err := list.Page(ctx, agent, q)
			var ids []string
			for _, s := range ss {
				ids = append(ids, s.ID)
			}
			return ids, next, err
		})
	})
}
