package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	msqlite "modernc.org/sqlite" // also registers the pure-Go "sqlite" database/sql driver
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Files returns the migrations of dialect whose file names end in suffix (such as
// "_stores.sql"), as a flat file system goose can run: a set of tables that another database may
// need too reuses the platform's migration files instead of a copy of them.
func Files(dialect Dialect, suffix string) (fs.FS, error) {
	entries, err := fs.ReadDir(files, string(dialect))
	if err != nil {
		return nil, fmt.Errorf("migrations of %s: %w", dialect, err)
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		data, err := fs.ReadFile(files, string(dialect)+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("migrations of %s: %w", dialect, err)
		}
		out[e.Name()] = &fstest.MapFile{Data: data}
	}
	return out, nil
}

// Dialect names a supported database.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// ErrBadURL is returned by Open for a database URL it cannot use.
var ErrBadURL = errors.New("migrations: bad database URL")

// DialectOf tells which dialect a gorm handle speaks. It and DialectOfURL are the one way svc
// tells the dialects apart: code that needs SQL of its own per dialect asks them, never the
// handle's driver name or the URL's scheme.
func DialectOf(db *gorm.DB) Dialect {
	if db.Dialector.Name() == "postgres" {
		return Postgres
	}
	return SQLite
}

// DialectOfURL tells which dialect a database URL names, as Open reads it: Postgres for a
// postgres:// or postgresql:// URL, SQLite for anything else (sqlite:PATH or a file path).
func DialectOfURL(url string) Dialect {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return Postgres
	}
	return SQLite
}

// WhereJSONKey narrows tx to the rows whose column, a JSON object of strings, has key with
// value, in the SQL of db's dialect.
func WhereJSONKey(tx *gorm.DB, column, key, value string) *gorm.DB {
	if DialectOf(tx) == Postgres {
		return tx.Where("("+column+"::jsonb ->> ?) = ?", key, value)
	}
	return tx.Where("json_extract("+column+", ?) = ?", `$."`+strings.ReplaceAll(key, `"`, `\"`)+`"`, value)
}

// Open connects to the database named by url and applies every pending migration.
//
// A url starting with postgres:// or postgresql:// is Postgres; sqlite:PATH or a plain file path
// is SQLite (created when missing). SQLite runs in WAL mode with a busy timeout and immediate
// transactions, so that concurrent writers queue instead of failing; the writers of this
// process queue on a lock of their own first, handed over at once (sqlitelock.go).
func Open(ctx context.Context, url string) (*gorm.DB, error) {
	db, err := OpenRaw(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := Up(ctx, db); err != nil {
		if sqlDB, e := db.DB(); e == nil {
			_ = sqlDB.Close() // the migration error is the one worth reporting
		}
		return nil, err
	}
	return db, nil
}

// defaultPostgresPool is the number of Postgres connections a handle keeps open at most,
// unless its URL says otherwise (pool_max_conns).
const defaultPostgresPool = 32

// maxPostgresPool bounds pool_max_conns.
const maxPostgresPool = 1000

// takePoolSize takes the parameter pool_max_conns (pgxpool's name for it) off a postgres://
// URL: the connections the handle keeps open at most, 1 to maxPostgresPool, defaultPostgresPool
// without it. Every process of a scale-out (and every agent store on Postgres) has a pool of
// its own, and their sum must stay within the server's max_connections (100 by default).
func takePoolSize(raw string) (string, int, error) {
	u, err := neturl.Parse(raw)
	if err != nil || !u.Query().Has("pool_max_conns") {
		return raw, defaultPostgresPool, nil // a URL that does not parse is the driver's to report
	}
	q := u.Query()
	v := q.Get("pool_max_conns")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPostgresPool {
		return "", 0, fmt.Errorf("%w: pool_max_conns %q must be a whole number from 1 to %d", ErrBadURL, v, maxPostgresPool)
	}
	q.Del("pool_max_conns")
	u.RawQuery = q.Encode()
	return u.String(), n, nil
}

// OpenRaw connects like Open but applies no migration.
func OpenRaw(ctx context.Context, url string) (*gorm.DB, error) {
	cfg := &gorm.Config{Logger: logger.Discard, TranslateError: true}
	var dialector gorm.Dialector
	pool := defaultPostgresPool
	switch {
	case DialectOfURL(url) == Postgres:
		var err error
		if url, pool, err = takePoolSize(url); err != nil {
			return nil, err
		}
		dialector = postgresDialector{postgres.Open(url).(*postgres.Dialector)}
	case url == "":
		return nil, fmt.Errorf("%w: empty", ErrBadURL)
	default:
		path := strings.TrimPrefix(url, "sqlite:")
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
		if strings.Contains(path, "?") {
			return nil, fmt.Errorf("%w: sqlite path %q must not carry parameters", ErrBadURL, path)
		}
		createPrivate(path)
		conn := sql.OpenDB(newLockedConnector(path, dsn)) // writers queue on a lock of this process (sqlitelock.go)
		dialector = sqliteDialector{sqlite.New(sqlite.Config{Conn: conn}).(*sqlite.Dialector)}
	}
	db, err := gorm.Open(dialector, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if DialectOf(db) == SQLite {
		// One writer at a time is SQLite's model; a small pool keeps readers concurrent under WAL.
		sqlDB.SetMaxOpenConns(8)
		// All of them kept open: with database/sql's default of 2 idle, a busy process closed
		// and reopened connections all the time, each reapplying the pragmas and preparing its
		// statements again.
		sqlDB.SetMaxIdleConns(8)
	} else {
		sqlDB.SetMaxOpenConns(pool)
		// Kept open too: with database/sql's default of 2 idle, every burst of concurrent
		// queries (a batch of channel turns, a page of automation fires) closed all but 2 of
		// its connections and the next burst opened them again, each a new Postgres backend
		// process (a fork and an authentication: more CPU than the queries). A connection idle
		// for 5 minutes is let go, so a quiet process does not hold its whole pool.
		sqlDB.SetMaxIdleConns(pool)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close() // the ping error is the one worth reporting
		return nil, fmt.Errorf("connect database: %w", err)
	}
	return db, nil
}

// Up applies every pending migration of db's dialect. Concurrent callers on Postgres are
// serialised with an advisory lock, so several processes may start at once.
func Up(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := provider(db, sqlDB)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		slog.DebugContext(ctx, "migration applied", "version", r.Source.Version, "path", r.Source.Path)
	}
	return nil
}

// DownTo rolls db back to version, newest migration first: each migration's Down section.
// Every migration has one, and a test runs them; svc itself only migrates up.
func DownTo(ctx context.Context, db *gorm.DB, version int64) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	p, err := provider(db, sqlDB)
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return nil
}

// Version reports the newest applied migration version.
func Version(ctx context.Context, db *gorm.DB) (int64, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return 0, fmt.Errorf("migration version: %w", err)
	}
	p, err := provider(db, sqlDB)
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migration version: %w", err)
	}
	return v, nil
}

func provider(db *gorm.DB, sqlDB *sql.DB) (*goose.Provider, error) {
	dialect := DialectOf(db)
	sub, err := fs.Sub(files, string(dialect))
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	gd := goose.DialectSQLite3
	if dialect == Postgres {
		gd = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gd, sqlDB, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}

// sqliteDialector translates modernc's errors, which gorm's SQLite driver (written for the cgo
// driver's error shape) leaves untranslated: duplicate keys must be gorm.ErrDuplicatedKey on both dialects.
type sqliteDialector struct{ *sqlite.Dialector }

// Explain gives a statement with its placeholders, not its arguments. gorm calls it for every
// Scan, whatever the logger (to record the statement for the logger's trace, which
// logger.Discard drops): formatting every argument of a 200-row insert was 2% of a channel
// intake's CPU. The platform logs no SQL, and an argument may be a secret.
func (d sqliteDialector) Explain(sql string, _ ...any) string { return sql }

// postgresDialector is gorm's Postgres dialector, its statements explained without their
// arguments (sqliteDialector.Explain).
type postgresDialector struct{ *postgres.Dialector }

// Explain gives a statement with its placeholders (sqliteDialector.Explain).
func (d postgresDialector) Explain(sql string, _ ...any) string { return sql }

func (d sqliteDialector) Translate(err error) error {
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case 1555, 2067:
			return gorm.ErrDuplicatedKey
		case 787:
			return gorm.ErrForeignKeyViolated
		}
	}
	return err
}

// createPrivate creates the SQLite database file at path, empty (an empty file is an empty
// database) and with mode 0600, when it does not exist: SQLite itself would create it 0644, and
// it gives its -wal, -shm and -journal files the mode of the database, so those are 0600 too. An
// existing file keeps its mode (it may be the user's; RestrictSQLiteFiles tightens svc's own).
// Any failure is left for SQLite to report when it opens the file.
func createPrivate(path string) {
	if path == "" || path == ":memory:" {
		return
	}
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		_ = f.Close()
	}
}

// RestrictSQLiteFiles sets mode 0600 on the SQLite database at path and on those of its -wal,
// -shm and -journal files that exist, for a database that svc created in its own data dir (older
// versions created it 0644). A database that does not exist yet is no error.
func RestrictSQLiteFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("restrict database file: %w", err)
		}
	}
	return nil
}
