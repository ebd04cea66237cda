package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

func TestAccessSettings(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		a := mustCreateAgent(t, db, "desk")
		s := registry.NewAccess(db)
		if _, _, err := s.Get(ctx, a.ID); !errors.Is(err, registry.ErrNoAccessSettings) {
			t.Fatalf("Get before Put: %v, want ErrNoAccessSettings", err)
		}
		for _, doc := range []string{`{"oidc":{"issuer":"https://a"}}`, `{"oidc":{"issuer":"https://b"}}`} {
			if err := s.Put(ctx, a.ID, json.RawMessage(doc)); err != nil {
				t.Fatal(err)
			}
			got, at, err := s.Get(ctx, a.ID)
			if err != nil || string(got) != doc || at.IsZero() {
				t.Errorf("Get = %s, %v, %v; want %s", got, at, err, doc)
			}
		}
		if err := s.Put(ctx, "a-missing", json.RawMessage(`{}`)); err == nil {
			t.Error("Put for an agent that does not exist succeeded")
		}
	})
}

func TestBrowserSessions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		a := mustCreateAgent(t, db, "desk")
		s := registry.NewBrowserSessions(db)
		now := time.Now().UTC().Truncate(time.Millisecond)
		bs := registry.BrowserSession{IDHash: "h1", AgentID: a.ID, UserID: "u1", Email: "u1@example.com", OrgID: "o1",
			Groups: []string{"eng", "ops"}, CreatedAt: now, ExpiresAt: now.Add(12 * time.Hour)}
		if err := s.Create(ctx, bs); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, registry.BrowserSession{IDHash: "h2", AgentID: a.ID, UserID: "u2", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "h1")
		if err != nil || got.UserID != "u1" || got.Email != "u1@example.com" || got.OrgID != "o1" || !slices.Equal(got.Groups, []string{"eng", "ops"}) ||
			!got.ExpiresAt.Equal(bs.ExpiresAt) || got.EndedAt != nil {
			t.Fatalf("Get = %+v, %v; want %+v", got, err, bs)
		}
		if got, err := s.Get(ctx, "h2"); err != nil || len(got.Groups) != 0 {
			t.Errorf("Get of a session without groups = %+v, %v", got, err)
		}
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, registry.ErrBrowserSessionNotFound) {
			t.Errorf("Get of an unknown hash: %v, want ErrBrowserSessionNotFound", err)
		}
		if ended, err := s.EndedSince(ctx, now.Add(-time.Hour)); err != nil || len(ended) != 0 {
			t.Errorf("EndedSince before any logout = %v, %v", ended, err)
		}
		end := now.Add(time.Second)
		if err := s.End(ctx, "h1", end); err != nil {
			t.Fatal(err)
		}
		if err := s.End(ctx, "h1", end.Add(time.Hour)); err != nil { // a second logout keeps the first time
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "h1"); err != nil || got.EndedAt == nil || !got.EndedAt.Equal(end) {
			t.Errorf("after End: %+v, %v; want ended at %v", got, err, end)
		}
		if ended, err := s.EndedSince(ctx, end); err != nil || !slices.Equal(ended, []string{"h1"}) {
			t.Errorf("EndedSince(end) = %v, %v; want [h1]", ended, err)
		}
		if ended, err := s.EndedSince(ctx, end.Add(time.Millisecond)); err != nil || len(ended) != 0 {
			t.Errorf("EndedSince(after end) = %v, %v; want none", ended, err)
		}
		// h2 expired a minute after now; h1 ended at now+1s.
		if n, err := s.DeleteExpired(ctx, now.Add(2*time.Second)); err != nil || n != 1 {
			t.Errorf("DeleteExpired(now+2s) = %d, %v; want 1 (the ended one)", n, err)
		}
		if n, err := s.DeleteExpired(ctx, now.Add(2*time.Minute)); err != nil || n != 1 {
			t.Errorf("DeleteExpired(now+2m) = %d, %v; want 1 (the expired one)", n, err)
		}
	})
}

// Latest is each user's most recent browser session on the agent, ended ones included, in one
// query; users without one, and sessions on another agent, are not in it.
func TestBrowserSessionsLatest(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		a, b := mustCreateAgent(t, db, "desk"), mustCreateAgent(t, db, "other")
		s := registry.NewBrowserSessions(db)
		at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		for _, bs := range []registry.BrowserSession{
			{IDHash: "h1", AgentID: a.ID, UserID: "u1", Email: "old@example.com", CreatedAt: at},
			{IDHash: "h2", AgentID: a.ID, UserID: "u1", Email: "new@example.com", EmailVerified: true, Groups: []string{"eng"}, CreatedAt: at.Add(time.Hour)},
			{IDHash: "h3", AgentID: b.ID, UserID: "u1", Email: "later@example.com", CreatedAt: at.Add(2 * time.Hour)},
			{IDHash: "h4", AgentID: a.ID, UserID: "u2", Email: "u2@example.com", CreatedAt: at},
		} {
			bs.ExpiresAt = bs.CreatedAt.Add(time.Hour)
			if err := s.Create(ctx, bs); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.End(ctx, "h2", at.Add(90*time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Latest(ctx, a.ID, []string{"u1", "u2", "u3"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got["u1"].IDHash != "h2" || got["u1"].Email != "new@example.com" || !got["u1"].EmailVerified ||
			!slices.Equal(got["u1"].Groups, []string{"eng"}) || got["u2"].IDHash != "h4" {
			t.Errorf("Latest = %+v, want u1's h2 (new@example.com, verified, [eng]) and u2's h4", got)
		}
		if got, err := s.Latest(ctx, a.ID, nil); err != nil || len(got) != 0 {
			t.Errorf("Latest of no users = %v, %v; want empty", got, err)
		}
	})
}
