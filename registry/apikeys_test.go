package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/registry"
)

func TestAPIKeys(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a1','a1','A',?,?)`, time.Now(), time.Now()).Error; err != nil {
		t.Fatal(err)
	}
	keys := registry.NewAPIKeys(db)
	k, value, err := keys.Create(ctx, "a1", "backend")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(value, "ak_") {
		t.Fatalf("key = %q, want ak_ prefix", value)
	}
	got, err := keys.Authenticate(ctx, value)
	if err != nil || got.ID != k.ID {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}
	// An agent key is never a platform token.
	if _, err := registry.NewTokens(db).Authenticate(ctx, value); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("ak_ as platform token = %v, want ErrUnauthenticated", err)
	}
}

// TestAPIKeysCheck runs the key cache of package auth over the real store, on SQLite and
// Postgres: list, use, lastUsedAt, revoke, and a revoked key refused after the next poll.
func TestAPIKeysCheck(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		for _, id := range []string{"a1", "a2"} {
			if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES (?,?,'A',?,?)`, id, id, time.Now(), time.Now()).Error; err != nil {
				t.Fatal(err)
			}
		}
		store := registry.NewAPIKeys(db)
		k1, v1, err := store.Create(ctx, "a1", "backend")
		if err != nil {
			t.Fatal(err)
		}
		k2, v2, err := store.Create(ctx, "a1", "cron")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Second) // revocations are stamped by the real clock
		keys := auth.NewKeys(auth.KeysParams{Store: store, Now: func() time.Time { return now }})
		if err := keys.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := keys.Check(ctx, v1)
		if err != nil || got != (auth.AgentKey{ID: k1.ID, AgentID: "a1"}) {
			t.Fatalf("Check(k1) = %+v, %v", got, err)
		}
		for _, bad := range []string{"ak_unknown", "pk_x", ""} {
			if _, err := keys.Check(ctx, bad); !errors.Is(err, auth.ErrUnauthenticated) {
				t.Errorf("Check(%q) = %v, want ErrUnauthenticated", bad, err)
			}
		}
		if err := keys.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		list, err := store.List(ctx, "a1")
		if err != nil || len(list) != 2 {
			t.Fatalf("List = %+v, %v", list, err)
		}
		if list[0].ID != k1.ID || list[0].LastUsedAt == nil || !list[0].LastUsedAt.Equal(now) || list[1].LastUsedAt != nil {
			t.Errorf("List = %+v, want %s used at %s and %s never", list, k1.ID, now, k2.ID)
		}
		if other, _ := store.List(ctx, "a2"); len(other) != 0 {
			t.Errorf("List(a2) = %+v, want none", other)
		}

		// Revoke: another agent's id is not found; the key is refused once polled, although cached.
		if err := store.Revoke(ctx, "a2", k2.ID); !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("Revoke(a2, k2) = %v, want ErrNotFound", err)
		}
		if _, err := keys.Check(ctx, v2); err != nil {
			t.Fatal(err)
		}
		if err := store.Revoke(ctx, "a1", k2.ID); err != nil {
			t.Fatal(err)
		}
		if err := store.Revoke(ctx, "a1", k2.ID); !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("second Revoke = %v, want ErrNotFound", err)
		}
		if err := keys.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := keys.Check(ctx, v2); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("Check(revoked) = %v, want ErrUnauthenticated", err)
		}
		// A process that never saw the key reads it revoked.
		fresh := auth.NewKeys(auth.KeysParams{Store: store})
		if _, err := fresh.Check(ctx, v2); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("fresh Check(revoked) = %v, want ErrUnauthenticated", err)
		}
		if list, _ := store.List(ctx, "a1"); len(list) != 1 || list[0].ID != k1.ID {
			t.Errorf("List after revoke = %+v, want only %s", list, k1.ID)
		}
	})
}

// Get returns a key revoked or not, and refuses another agent's id.
func TestAPIKeysGet(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag, other := mustCreateAgent(t, db, "keyed"), mustCreateAgent(t, db, "other")
		s := registry.NewAPIKeys(db)
		k, _, err := s.Create(ctx, ag.ID, "cron")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, ag.ID, k.ID); err != nil || got.RevokedAt != nil {
			t.Fatalf("Get = %+v, %v", got, err)
		}
		if err := s.Revoke(ctx, ag.ID, k.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, ag.ID, k.ID); err != nil || got.RevokedAt == nil {
			t.Errorf("Get of a revoked key = %+v, %v", got, err)
		}
		if _, err := s.Get(ctx, other.ID, k.ID); !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("Get with another agent: %v", err)
		}
	})
}
