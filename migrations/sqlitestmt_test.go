package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// oneConn is the migrated SQLite database of openSQLite on a single connection, and a function
// that returns the statements that connection keeps.
func oneConn(t *testing.T) (*sql.DB, func() []string) {
	t.Helper()
	db, _ := openSQLite(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1)
	kept := func() []string {
		conn, err := sqlDB.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var qs []string
		err = conn.Raw(func(dc any) error {
			c := dc.(*lockedConn)
			c.stmts.mu.Lock()
			defer c.stmts.mu.Unlock()
			for e := c.stmts.lru.Front(); e != nil; e = e.Next() {
				qs = append(qs, e.Value.(*keptStmt).query)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return qs
	}
	return sqlDB, kept
}

// A statement run again is the one kept; its results are those of the unprepared statement.
func TestSQLiteKeepsStatements(t *testing.T) {
	db, kept := oneConn(t)
	ctx := context.Background()
	before := len(kept()) // the migrations' own reads and writes of goose_db_version
	const insert = `INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`
	const count = `SELECT count(*) FROM agents WHERE name = ?`
	for i := range 3 {
		id := fmt.Sprintf("a%d", i)
		if _, err := db.ExecContext(ctx, insert, id, id, "A", time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRowContext(ctx, count, "A").Scan(&n); err != nil || n != i+1 {
			t.Fatalf("count = %d, %v; want %d", n, err, i+1)
		}
	}
	if got := kept(); len(got) != before+2 || got[0] != count || got[1] != insert {
		t.Errorf("kept %q; want the count, then the insert", got)
	}
	// A constraint error leaves the kept statement usable.
	if _, err := db.ExecContext(ctx, insert, "a0", "a0", "A", time.Now(), time.Now()); err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Errorf("duplicate insert = %v, want a UNIQUE constraint error", err)
	}
	if _, err := db.ExecContext(ctx, insert, "a9", "a9", "A", time.Now(), time.Now()); err != nil {
		t.Errorf("the insert after an error: %v", err)
	}
	// A syntax error is the statement's own, and nothing is kept of it.
	if _, err := db.ExecContext(ctx, `INSERT INTO nowhere VALUES (1)`); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("insert into a missing table = %v", err)
	}
	if got := kept(); len(got) != before+2 || got[0] != insert {
		t.Errorf("kept %q after a failed prepare; want the two, the insert first", got)
	}
}

// While rows of a statement are open, the same text runs again unprepared (a transaction may
// query while it reads); an INSERT ... RETURNING's rows give the statement and the lock back.
func TestSQLiteKeptStatementBusy(t *testing.T) {
	db, kept := oneConn(t)
	ctx := context.Background()
	before := len(kept())
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES (?, ?, 'A', ?, ?)`, fmt.Sprint(i), fmt.Sprint(i), time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	const ids = `SELECT id FROM agents ORDER BY id`
	outer, err := tx.QueryContext(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for outer.Next() {
		var a string
		if err := outer.Scan(&a); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.QueryContext(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for inner.Next() {
			var b string
			if err := inner.Scan(&b); err != nil {
				t.Fatal(err)
			}
			pairs = append(pairs, a+b)
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := outer.Close(); err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 9 || pairs[0] != "00" || pairs[8] != "22" {
		t.Errorf("nested reads of one statement = %q, want the 9 pairs", pairs)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var got []string
	rows, err := db.QueryContext(ctx, `UPDATE agents SET name = 'B' RETURNING id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		got = append(got, id)
	}
	rows.Close()
	if len(got) != 3 {
		t.Errorf("UPDATE ... RETURNING = %q", got)
	}
	if _, err := db.ExecContext(ctx, `UPDATE agents SET name = 'C'`); err != nil {
		t.Errorf("a write after RETURNING's rows closed: %v", err)
	}
	if n := len(kept()) - before; n != 4 {
		t.Errorf("%d statements kept, want 4", n)
	}
}

// A connection keeps its stmtCacheSize most recent statements, not one longer than
// stmtCacheMaxLen nor the schema's; a kept statement still runs after the schema changes
// under it.
func TestSQLiteStatementCacheBounds(t *testing.T) {
	db, kept := oneConn(t)
	ctx := context.Background()
	for i := range stmtCacheSize + 10 {
		var n int
		if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT %d", i)).Scan(&n); err != nil || n != i {
			t.Fatalf("SELECT %d = %d, %v", i, n, err)
		}
	}
	got := kept()
	if len(got) != stmtCacheSize || got[0] != fmt.Sprintf("SELECT %d", stmtCacheSize+9) || got[len(got)-1] != "SELECT 10" {
		t.Errorf("kept %d statements, %q first and %q last; want %d, the newest first", len(got), got[0], got[len(got)-1], stmtCacheSize)
	}
	long := "SELECT 1 " + strings.Repeat(" ", stmtCacheMaxLen)
	if _, err := db.ExecContext(ctx, long); err != nil {
		t.Fatal(err)
	}
	if kept()[0] == long {
		t.Error("a statement longer than stmtCacheMaxLen is kept")
	}
	const sel = `SELECT * FROM agents`
	count := func() int {
		rows, err := db.QueryContext(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		return len(cols)
	}
	before := count()
	if _, err := db.ExecContext(ctx, `ALTER TABLE agents ADD COLUMN extra TEXT`); err != nil {
		t.Fatal(err)
	}
	if kept()[0] != sel {
		t.Error("a schema change is kept prepared")
	}
	if after := count(); after != before+1 {
		t.Errorf("SELECT * after ALTER TABLE: %d columns, want %d", after, before+1)
	}
}

func TestKeeps(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1": true, " insert into x values (1)": true, "(SELECT 1)": true, "WITH a AS (SELECT 1) DELETE FROM x": true, "UPDATE x SET a = 1": true,
		"CREATE TABLE y (a)": false, "ALTER TABLE y ADD COLUMN b": false, "DROP INDEX i": false, "PRAGMA wal_checkpoint": false, "BEGIN": false,
		"SELECT 1" + strings.Repeat(" ", stmtCacheMaxLen): false,
	} {
		if got := keeps(q); got != want {
			t.Errorf("keeps(%.30q) = %v, want %v", q, got, want)
		}
	}
}
