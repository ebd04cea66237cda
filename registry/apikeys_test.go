package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
