package migrations

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
)

// openSQLite opens a migrated SQLite database in a file of its own, and the write lock of
// that file.
func openSQLite(t *testing.T) (*gorm.DB, chan struct{}) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "svc.db")
	db, err := Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return db, writeLockOf(path)
}

// A transaction holds the write lock from BEGIN to its end; a write outside one holds it while
// it runs, an INSERT ... RETURNING until its rows are closed; a read takes nothing.
func TestSQLiteWriteLockSpans(t *testing.T) {
	db, lock := openSQLite(t)
	ctx := context.Background()
	held := func() bool { return len(lock) == 1 }
	tx := db.Begin()
	if tx.Error != nil || !held() {
		t.Fatalf("Begin: %v, lock held %v; want held", tx.Error, held())
	}
	if err := tx.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a1', 'a1', 'A', ?, ?)`, time.Now(), time.Now()).Error; err != nil {
		t.Fatal(err)
	}
	// Another connection's write waits for it: here until its context ends.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := db.WithContext(short).Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a2', 'a2', 'B', ?, ?)`, time.Now(), time.Now()).Error
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a write beside an open transaction = %v, want it to wait (DeadlineExceeded)", err)
	}
	var n int64
	if err := db.Raw(`SELECT count(*) FROM agents`).Scan(&n).Error; err != nil || n != 0 {
		t.Errorf("a read beside an open transaction = %d, %v; want 0 rows, no wait", n, err)
	}
	if err := tx.Commit().Error; err != nil || held() {
		t.Fatalf("Commit: %v, lock held %v; want released", err, held())
	}
	rows, err := db.Raw(`UPDATE agents SET name = 'C' WHERE id = 'a1' RETURNING id`).Rows()
	if err != nil || !held() {
		t.Fatalf("UPDATE ... RETURNING: %v, lock held %v; want held while its rows are open", err, held())
	}
	for rows.Next() {
	}
	if err := rows.Close(); err != nil || held() {
		t.Fatalf("rows.Close: %v, lock held %v; want released", err, held())
	}
	if err := db.Transaction(func(tx *gorm.DB) error { return errors.New("boom") }); err == nil || held() {
		t.Fatalf("a rolled back transaction: %v, lock held %v; want released", err, held())
	}
}

// Many writers at once, in transactions and alone, all succeed, one at a time.
func TestSQLiteWritersQueue(t *testing.T) {
	db, lock := openSQLite(t)
	now := time.Now()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 10 {
				id := string(rune('a'+g)) + "-" + string(rune('a'+i))
				var err error
				if g%2 == 0 {
					err = db.Transaction(func(tx *gorm.DB) error {
						return tx.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES (?, ?, 'A', ?, ?)`, id, id, now, now).Error
					})
				} else {
					var got []string
					err = db.Raw(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES (?, ?, 'A', ?, ?) RETURNING id`, id, id, now, now).Scan(&got).Error
				}
				if err != nil {
					t.Errorf("writer %d, write %d: %v", g, i, err)
				}
			}
		})
	}
	wg.Wait()
	var n int64
	if err := db.Raw(`SELECT count(*) FROM agents`).Scan(&n).Error; err != nil || n != 160 {
		t.Errorf("%d agents, %v; want 160", n, err)
	}
	if len(lock) != 0 {
		t.Error("the write lock is held after every writer is done")
	}
}

func TestWrites(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1": false, " select * from x": false, "(SELECT 1)": false, "PRAGMA wal_checkpoint": false, "EXPLAIN QUERY PLAN SELECT 1": false,
		"INSERT INTO x VALUES (1)": true, "update x set a = 1": true, "DELETE FROM x": true, "WITH a AS (SELECT 1) DELETE FROM x": true, "CREATE TABLE y (a)": true,
	} {
		if got := writes(q); got != want {
			t.Errorf("writes(%q) = %v, want %v", q, got, want)
		}
	}
}
