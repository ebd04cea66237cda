// Package dbtest gives tests a migrated, private database on SQLite and on a real Postgres server.
//
// Postgres comes from SVC_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable);
// each call creates a fresh database and drops it when the test ends, so tests never see each
// other's rows. When Postgres cannot be reached the test fails under CI (env CI or
// SVC_TEST_REQUIRE_SERVICES set) and is skipped with the reason otherwise.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations"
)

// DefaultPostgresURL is the server tests use when SVC_TEST_DATABASE_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// RequireServices reports whether a missing test service must fail the test instead of skipping it.
func RequireServices() bool {
	return os.Getenv("CI") != "" || os.Getenv("SVC_TEST_REQUIRE_SERVICES") != ""
}

// Missing fails or skips t for a service that is not there, naming it and how to start it.
func Missing(t testing.TB, service string, err error) {
	t.Helper()
	if RequireServices() {
		t.Fatalf("%s is required (CI or SVC_TEST_REQUIRE_SERVICES is set) but unavailable: %v", service, err)
	}
	t.Skipf("%s unavailable (%v); run `make services` or set CI=1 to make this fatal", service, err)
}

// SQLite opens a migrated SQLite database in a temporary file, closed when t ends.
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	return SQLiteAt(t, filepath.Join(t.TempDir(), "svc.db"))
}

// SQLiteAt opens (or reopens) a migrated SQLite database at path, closed when t ends.
func SQLiteAt(t testing.TB, path string) *gorm.DB {
	t.Helper()
	db, err := migrations.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { closeDB(t, db) })
	return db
}

// PostgresURL creates a fresh, empty Postgres database for t and returns its URL; it is dropped when t ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("SVC_TEST_DATABASE_URL")
	if base == "" {
		base = DefaultPostgresURL
	}
	admin, err := migrations.OpenRaw(context.Background(), base)
	if err != nil {
		Missing(t, "Postgres at "+redact(base), err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	name := "svc_test_" + hex.EncodeToString(b[:])
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		closeDB(t, admin)
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error; err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
		closeDB(t, admin)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse SVC_TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Postgres opens a migrated, private Postgres database, closed and dropped when t ends.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := migrations.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { closeDB(t, db) })
	return db
}

// Each runs fn as subtests "sqlite" and "postgres", each with its own migrated database.
func Each(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
}

func closeDB(t testing.TB, db *gorm.DB) {
	sqlDB, err := db.DB()
	if err != nil {
		t.Errorf("close database: %v", err)
		return
	}
	if err := sqlDB.Close(); err != nil {
		t.Errorf("close database: %v", err)
	}
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
