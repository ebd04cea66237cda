package stores_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"svc/agent"
	"svc/migrations"
	"svc/migrations/dbtest"
	"svc/runner/stores"
	"svc/runner/stores/storestest"
)

// sqlFactory gives each subtest of the suite its own agent ids in db.
func sqlFactory(db *gorm.DB) func(t *testing.T) storestest.Factory {
	n := 0
	return func(t *testing.T) storestest.Factory {
		n++
		prefix := fmt.Sprintf("t%d-", n)
		return func(agentID string) stores.Backend { return stores.NewSQL(db, prefix+agentID) }
	}
}

// TestSQLPlatform runs the suite on the platform database (migration 00009), SQLite and Postgres.
func TestSQLPlatform(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		storestest.Run(t, sqlFactory(db))
	})
}

// openOwn opens a database of the agent's own through Open, as svc.json "stores" with a url
// does; it is closed when t ends.
func openOwn(t *testing.T, backend, url, agentID string) stores.Backend {
	t.Helper()
	b, err := stores.Open(context.Background(), stores.OpenParams{
		Config:  &agent.StoresConfig{Backend: backend, URL: "env:STORE_DB"},
		AgentID: agentID,
		Env: func(name string) (string, bool) {
			if name != "STORE_DB" {
				return "", false
			}
			return url, true
		},
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// TestSQLOwnDatabase runs the suite on databases given by a url, which Open creates the store
// tables in with the platform's store migrations.
func TestSQLOwnDatabase(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "stores.db")
		storestest.Run(t, func(t *testing.T) storestest.Factory {
			return func(agentID string) stores.Backend { return openOwn(t, "sqlite", "sqlite:"+path, t.Name()+agentID) }
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := dbtest.PostgresURL(t)
		storestest.Run(t, func(t *testing.T) storestest.Factory {
			return func(agentID string) stores.Backend { return openOwn(t, "postgres", url, t.Name()+agentID) }
		})
	})
}

// TestOwnDatabaseSchema checks what the first use of a backend that Open made leaves in a
// database of the agent's own: the store tables and a goose version table of its own, and
// nothing of the platform; opening again applies nothing new.
func TestOwnDatabaseSchema(t *testing.T) {
	check := func(t *testing.T, backend, url string) {
		for range 2 { // the second time: already up to date
			if _, err := openOwn(t, backend, url, "a").Get(context.Background(), "notes", "n"); !errors.Is(err, stores.ErrNotFound) {
				t.Fatalf("Get = %v, want ErrNotFound from an opened database", err)
			}
		}
		db, err := migrations.OpenRaw(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if sqlDB, err := db.DB(); err == nil {
				sqlDB.Close()
			}
		})
		m := db.Migrator()
		for _, table := range []string{"store_records", "store_versions", "svc_stores_goose_version"} {
			if !m.HasTable(table) {
				t.Errorf("table %s is missing", table)
			}
		}
		for _, table := range []string{"goose_db_version", "agents", "sessions"} {
			if m.HasTable(table) {
				t.Errorf("table %s of the platform was created", table)
			}
		}
		var applied []int64
		if err := db.Raw("SELECT version_id FROM svc_stores_goose_version WHERE version_id > 0 ORDER BY id").Scan(&applied).Error; err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(applied) != "[9]" {
			t.Errorf("applied store migrations = %v, want [9], the platform's 00009_stores.sql", applied)
		}
	}
	t.Run("sqlite", func(t *testing.T) { check(t, "sqlite", filepath.Join(t.TempDir(), "own.db")) })
	t.Run("postgres", func(t *testing.T) { check(t, "postgres", dbtest.PostgresURL(t)) })
}

// TestOwnDatabaseIsThePlatformDatabase points stores.url at the platform database itself: the
// store schema finds its tables there (IF NOT EXISTS) and both see the same rows.
func TestOwnDatabaseIsThePlatformDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.db")
	platform := dbtest.SQLiteAt(t, path)
	own, err := stores.New(stores.Params{Stores: storestest.Definitions(), Backend: openOwn(t, "sqlite", "sqlite:"+path, "a")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.Set(context.Background(), "notes", []byte(`{"id":"n"}`), stores.Trace{}); err != nil {
		t.Fatal(err)
	}
	shared, err := stores.New(stores.Params{Stores: storestest.Definitions(), Backend: stores.NewSQL(platform, "a")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Get(context.Background(), "notes", "n"); err != nil {
		t.Fatalf("the platform database does not see the record: %v", err)
	}
}
