package runtime_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/registry"
)

// testKeys are ak_ keys in the real registry store (SQLite) behind the real key cache.
type testKeys struct {
	db      *gorm.DB
	store   *registry.APIKeys
	checker *auth.Keys
	ids     map[string]string // value → id
}

func newKeys(t testing.TB) *testKeys {
	db := dbtest.SQLite(t)
	store := registry.NewAPIKeys(db)
	k := &testKeys{db: db, store: store, checker: auth.NewKeys(auth.KeysParams{Store: store}), ids: map[string]string{}}
	if err := k.checker.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return k
}

// create makes a key of agentID (creating the agent row if needed) and returns its value.
func (k *testKeys) create(t testing.TB, agentID string) string {
	ctx := context.Background()
	if err := k.db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES (?,?,'A',?,?) ON CONFLICT DO NOTHING`,
		agentID, agentID, time.Now(), time.Now()).Error; err != nil {
		t.Fatal(err)
	}
	key, value, err := k.store.Create(ctx, agentID, "test")
	if err != nil {
		t.Fatal(err)
	}
	k.ids[value] = key.ID
	return value
}

// revoke uses the key once (so the cache holds it), revokes it, and polls as Run would.
func (k *testKeys) revoke(t testing.TB, value string) {
	ctx := context.Background()
	if _, err := k.checker.Check(ctx, value); err != nil {
		t.Fatal(err)
	}
	if err := k.store.Revoke(ctx, k.agentOf(t, value), k.ids[value]); err != nil {
		t.Fatal(err)
	}
	if err := k.checker.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
}

func (k *testKeys) agentOf(t testing.TB, value string) string {
	sk, err := k.store.KeyByHash(context.Background(), auth.Hash(value))
	if err != nil {
		t.Fatal(err)
	}
	return sk.AgentID
}
