package builder

import (
	"context"
	"errors"
	"io/fs"
	"strings"
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

// TestStoreCommit: the tree of a fetched commit, stored and read back, has the commit's files
// (a symbolic link inside the tree as a copy of its target) and digest, so a build of either
// gives one bundle; a missing object is registry.ErrNotFound.
func TestStoreCommit(t *testing.T) {
	ctx := context.Background()
	r, _ := fixtureRepo(t, "hello")
	r.symlink("docs/readme-link.md", "../svc.json")
	commit := r.commit("a link")
	c, err := FetchCommit(ctx, GitSource{URL: r.url(), Branch: "main", Commit: commit}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := c.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obj := newObjects(t)
	key := registry.CommitSourceKey("a1", commit)
	size, err := StoreCommit(ctx, obj, key, c)
	if err != nil || size <= 0 {
		t.Fatalf("StoreCommit = %d, %v", size, err)
	}
	stored, err := ReadSourceVersion(ctx, obj, key, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := bundle.Digest(fetched)
	if got, err := bundle.Digest(stored); got != want || err != nil {
		t.Errorf("digest of the stored tree = %s, %v; of the fetched commit %s", got, err, want)
	}
	if b, err := fs.ReadFile(stored, "docs/readme-link.md"); err != nil || !strings.Contains(string(b), `"name"`) {
		t.Errorf("the link in the stored tree = %q, %v; want a copy of svc.json", b, err)
	}
	if _, err := ReadSourceVersion(ctx, obj, registry.CommitSourceKey("a1", strings.Repeat("0", 40)), Limits{}); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("ReadSourceVersion(missing) = %v, want ErrNotFound", err)
	}
}
