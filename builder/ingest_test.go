package builder

import (
	"context"
	"errors"
	"testing"

	"svc/agent"
	"svc/bundle"
	"svc/migrations/dbtest"
	"svc/registry"
)

// TestIngest: a valid tree is stored with its digest; a tree with problems returns every problem
// and stores nothing.
func TestIngest(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a1','a1','A1',CURRENT_TIMESTAMP,CURRENT_TIMESTAMP)`).Error; err != nil {
		t.Fatal(err)
	}
	versions := registry.NewSourceVersions(db, newObjects(t))
	good, err := bundle.FromFiles(fixtureFiles(t, "hello"), bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := Ingest(ctx, versions, "a1", "tester", good)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := bundle.Digest(good); sv.Digest != want || sv.ID == "" {
		t.Errorf("source version = %+v, want digest %s", sv, want)
	}
	bad, err := bundle.FromFiles(fixtureFiles(t, "broken"), bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var problems agent.Problems
	if _, err := Ingest(ctx, versions, "a1", "tester", bad); !errors.As(err, &problems) || len(problems) < 3 {
		t.Fatalf("Ingest(broken) = %v, want its problems", err)
	}
	if newest, err := versions.Newest(ctx, "a1"); err != nil || newest.ID != sv.ID {
		t.Errorf("newest source version = %+v, %v; want the good one only", newest, err)
	}
}
