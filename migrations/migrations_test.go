package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
	"svc/migrations"
	"svc/migrations/dbtest"
)

func TestSchemaOnBothDialects(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		v, err := migrations.Version(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if v < 1 {
			t.Fatalf("Version = %d, want >= 1", v)
		}
		// Applying again is a no-op.
		if err := migrations.Up(ctx, db); err != nil {
			t.Fatalf("second Up: %v", err)
		}
		now := time.Now().UTC()
		if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "a1", "a1", "A", now, now).Error; err != nil {
			t.Fatal(err)
		}
		insert := func(id string, active bool) error {
			return db.Exec(`INSERT INTO deployments (id, agent_id, build_id, environment, status, is_active, created_at) VALUES (?, 'a1', 'b', 'production', 'ready', ?, ?)`, id, active, now).Error
		}
		if err := insert("d1", true); err != nil {
			t.Fatal(err)
		}
		if err := insert("d2", false); err != nil {
			t.Fatal(err)
		}
		// The partial unique index keeps one active deployment per agent and environment.
		err = insert("d3", true)
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			t.Fatalf("second active deployment: err = %v, want ErrDuplicatedKey", err)
		}
	})
}

// TestDownAndUpAgain: the newest migrations' Down sections undo them (on Postgres, 00014 and 00015 build
// and drop their indexes CONCURRENTLY, outside a transaction), and Up applies them again.
func TestDownAndUpAgain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		latest, err := migrations.Version(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if err := migrations.DownTo(ctx, db, 11); err != nil {
			t.Fatal(err)
		}
		if v, err := migrations.Version(ctx, db); err != nil || v != 11 {
			t.Fatalf("after DownTo(11): version %d, %v", v, err)
		}
		if err := migrations.Up(ctx, db); err != nil {
			t.Fatalf("Up after Down: %v", err)
		}
		if v, err := migrations.Version(ctx, db); err != nil || v != latest {
			t.Fatalf("after Up: version %d, %v; want %d", v, err, latest)
		}
	})
}

func TestOpenRejectsBadURL(t *testing.T) {
	if _, err := migrations.Open(context.Background(), ""); !errors.Is(err, migrations.ErrBadURL) {
		t.Fatalf("Open(\"\") err = %v, want ErrBadURL", err)
	}
	if _, err := migrations.Open(context.Background(), "sqlite:/tmp/x.db?mode=ro"); !errors.Is(err, migrations.ErrBadURL) {
		t.Fatalf("Open(params) err = %v, want ErrBadURL", err)
	}
}

// The connections a burst of concurrent queries opened stay open for the next burst (up to
// the pool's size): on Postgres a reopened connection is a new backend process.
func TestOpenKeepsConnections(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		var conns []*sql.Conn
		for range 8 {
			c, err := sqlDB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			_ = c.Close() // back to the pool
		}
		if s := sqlDB.Stats(); s.MaxIdleClosed != 0 || s.Idle < 8 {
			t.Errorf("after 8 concurrent connections: %d closed as idle beyond the limit, %d idle; want none closed, 8 idle", s.MaxIdleClosed, s.Idle)
		}
	})
}

// Statements are explained (for gorm's trace, on every Scan) without their arguments.
func TestExplainLeavesArgumentsOut(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		if got := db.Dialector.Explain("SELECT * FROM secrets WHERE value = ?", "hunter2"); got != "SELECT * FROM secrets WHERE value = ?" {
			t.Errorf("Explain = %q, want the statement with its placeholder", got)
		}
		if migrations.DialectOf(db) == migrations.Postgres && db.Dialector.Name() != "postgres" {
			t.Errorf("dialector name %q", db.Dialector.Name())
		}
	})
}

// pool_max_conns on a Postgres URL sizes the handle's pool (1 to 1000) and is not sent to the
// server; a bad value is ErrBadURL naming it.
func TestPoolMaxConns(t *testing.T) {
	ctx := context.Background()
	base := dbtest.PostgresURL(t)
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	for _, n := range []int{1, 1000} {
		db, err := migrations.OpenRaw(ctx, base+sep+"pool_max_conns="+strconv.Itoa(n))
		if err != nil {
			t.Fatalf("pool_max_conns=%d: %v", n, err)
		}
		sqlDB, _ := db.DB()
		if got := sqlDB.Stats().MaxOpenConnections; got != n {
			t.Errorf("pool_max_conns=%d: %d connections at most", n, got)
		}
		sqlDB.Close()
	}
	for _, v := range []string{"0", "1001", "x", ""} {
		_, err := migrations.OpenRaw(ctx, base+sep+"pool_max_conns="+v)
		if !errors.Is(err, migrations.ErrBadURL) || !strings.Contains(err.Error(), "pool_max_conns") {
			t.Errorf("pool_max_conns=%q: %v, want ErrBadURL naming it", v, err)
		}
	}
	db, err := migrations.OpenRaw(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	if got := sqlDB.Stats().MaxOpenConnections; got != 32 {
		t.Errorf("without pool_max_conns: %d connections at most, want 32", got)
	}
}
