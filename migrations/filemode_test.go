package migrations_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"svc/migrations"
)

// sqliteFiles returns the modes of the database file and of those of its side files that exist.
func sqliteFiles(t *testing.T, path string) map[string]fs.FileMode {
	t.Helper()
	modes := map[string]fs.FileMode{}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Stat(p)
		if os.IsNotExist(err) && p != path {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[filepath.Base(p)] = fi.Mode().Perm()
	}
	return modes
}

// TestSQLiteFilesPrivate checks that a SQLite database that Open creates, and the side files
// SQLite makes beside it (-wal, -shm), are readable by their owner only, as the rest of the data
// dir is, whatever the umask.
func TestSQLiteFilesPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.db")
	db, err := migrations.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	if err := db.Exec(`CREATE TABLE probe (x INTEGER)`).Error; err != nil {
		t.Fatal(err)
	}
	modes := sqliteFiles(t, path)
	if _, ok := modes["svc.db-wal"]; !ok {
		t.Errorf("no -wal file beside the database (journal_mode WAL): %v", modes)
	}
	for name, mode := range modes {
		if mode != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, mode)
		}
	}
}

// TestRestrictSQLiteFiles checks that the database of svc's own data dir, created with a looser
// mode by an earlier version, is tightened to 0600 with its side files.
func TestRestrictSQLiteFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.db")
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	if err := migrations.RestrictSQLiteFiles(path); err != nil {
		t.Fatal(err)
	}
	for name, mode := range sqliteFiles(t, path) {
		if mode != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, mode)
		}
	}
	// A database that does not exist yet is no error: Open creates it.
	if err := migrations.RestrictSQLiteFiles(filepath.Join(t.TempDir(), "none.db")); err != nil {
		t.Errorf("RestrictSQLiteFiles of a missing database: %v", err)
	}
}
