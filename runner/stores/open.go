package stores

import (
	"context"
	"fmt"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/gorm"

	"svc/agent"
	"svc/migrations"
)

// schemaSuffix ends the names of the platform migrations of the store tables (00009_stores.sql
// on): Open runs the same files on a database of the agent's own, so that both databases get the
// same tables from one copy of the SQL, and a change to the tables is one new migration.
const schemaSuffix = "_stores.sql"

// Names of the migration bookkeeping on a database of the agent's own: a goose version table
// and a Postgres advisory lock of their own, so that they never meet the platform's.
const (
	schemaTable  = "svc_stores_goose_version"
	schemaLockID = 7_348_251_903 // any constant other than goose's default lock id
)

// OpenParams say where an agent's records are kept.
type OpenParams struct {
	// Config is the svc.json "stores" entry; nil means the platform database, or memory when
	// there is none.
	Config *agent.StoresConfig
	// AgentID keeps the agent's records apart in a database other agents use too ("" under
	// svc dev).
	AgentID string
	// Env resolves the name of an env: reference in Config.URL (the agent's secrets first, then
	// the process environment); nil means none resolves. It is called at each use of the
	// stores until the database opens, never before the first use.
	Env func(name string) (string, bool)
	// Hint says how to set the variable name, for the error of an unset url: "set it with `svc
	// secrets set my-agent NAME` or in the runner's environment". nil means "set it as an agent
	// secret or in the runtime's environment".
	Hint func(name string) string
	// Platform is the platform database, migrated; nil when the runtime has none (svc dev).
	Platform *gorm.DB
}

// Open returns the backend of one agent's stores:
//
//   - no "stores" entry: the platform database (tables of migration 00009, rows of
//     p.AgentID), or memory when p.Platform is nil;
//   - backend "memory": memory, lost when the runtime stops (a url is not used);
//   - backend "sqlite" or "postgres" with a url: the database that env: reference names, as
//     migrations.Open takes it (postgres: a postgres:// or postgresql:// URL; sqlite: a file
//     path, or sqlite:PATH), brought up to date with the platform's store migrations (its own
//     goose version table). It is opened at the first use, not by Open: until it opens, each
//     use resolves the reference again and fails with ErrUnavailable when it is not set,
//     names the wrong kind of database, or the database does not open, so that only what
//     uses the stores fails, and setting the secret later makes the next use work. Once open
//     it stays open until Close: a changed value applies to a new backend (a runtime started
//     again);
//   - backend "sqlite" or "postgres" without a url: the platform database, whatever its
//     dialect; an error when there is none.
//
// Errors about the entry wrap ErrConfig and name its field; they never show the URL, which
// holds credentials.
func Open(ctx context.Context, p OpenParams) (Backend, error) {
	cfg := p.Config
	if cfg == nil {
		if p.Platform != nil {
			return NewSQL(p.Platform, p.AgentID), nil
		}
		return NewMemory(), nil
	}
	switch cfg.Backend {
	case agent.BackendMemory:
		return NewMemory(), nil
	case agent.BackendSQLite, agent.BackendPostgres:
	default:
		return nil, fmt.Errorf("%w: field %q must be one of memory, sqlite, postgres; got %q", ErrConfig, "stores.backend", cfg.Backend)
	}
	if cfg.URL == "" {
		if p.Platform == nil {
			return nil, fmt.Errorf("%w: field %q: backend %q without a url keeps records in the platform database, and this runtime has none", ErrConfig, "stores.url", cfg.Backend)
		}
		return NewSQL(p.Platform, p.AgentID), nil
	}
	if name, ok := strings.CutPrefix(cfg.URL, "env:"); !ok || name == "" {
		return nil, fmt.Errorf("%w: field %q must be an env: reference such as \"env:NAME\"", ErrConfig, "stores.url")
	}
	return newLazy(*cfg, p), nil
}

// openOwn opens and migrates the database of cfg.URL, resolved with p.Env. Its errors are
// *unavailableError.
func openOwn(ctx context.Context, cfg agent.StoresConfig, p OpenParams) (*SQL, error) {
	url, err := resolveURL(cfg, p.Env, p.Hint)
	if err != nil {
		return nil, err
	}
	db, err := migrations.OpenRaw(ctx, url)
	if err != nil {
		return nil, &unavailableError{reason: fmt.Sprintf("open the database of %s (field %q): %v", cfg.URL, "stores.url", err), err: err}
	}
	if err := migrateSchema(ctx, db); err != nil {
		closeDB(db)
		return nil, &unavailableError{reason: fmt.Sprintf("migrate the database of %s (field %q): %v", cfg.URL, "stores.url", err), err: err}
	}
	s := NewSQL(db, p.AgentID)
	s.owned = true
	return s, nil
}

// resolveURL resolves cfg.URL and checks that it names a database of cfg.Backend's kind.
func resolveURL(cfg agent.StoresConfig, env func(string) (string, bool), hint func(string) string) (string, error) {
	name, _ := strings.CutPrefix(cfg.URL, "env:")
	var (
		url string
		ok  bool
	)
	if env != nil {
		url, ok = env(name)
	}
	if !ok || url == "" {
		how := "set it as an agent secret or in the runtime's environment"
		if hint != nil {
			how = hint(name)
		}
		return "", &unavailableError{reason: fmt.Sprintf("field %q: %s is not set; %s", "stores.url", cfg.URL, how), err: ErrConfig}
	}
	isPG := migrations.DialectOfURL(url) == migrations.Postgres
	switch {
	case cfg.Backend == agent.BackendPostgres && !isPG:
		return "", &unavailableError{reason: fmt.Sprintf("field %q: backend postgres needs a postgres:// URL, and %s holds something else", "stores.url", cfg.URL), err: ErrConfig}
	case cfg.Backend == agent.BackendSQLite && (isPG || strings.Contains(url, "://")):
		return "", &unavailableError{reason: fmt.Sprintf("field %q: backend sqlite needs sqlite:PATH or a file path, and %s holds a URL", "stores.url", cfg.URL), err: ErrConfig}
	}
	return url, nil
}

// unavailableError is why a database of the agent's own did not open. Its text names the field
// and the env: reference, never the URL. It matches ErrUnavailable and err (ErrConfig, or the
// error of the database).
type unavailableError struct {
	reason string
	err    error
}

func (e *unavailableError) Error() string   { return "the stores database is unavailable: " + e.reason }
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// migrateSchema applies the platform's store migrations to db, with a version table of their own.
func migrateSchema(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	dialect := migrations.DialectOf(db)
	sub, err := migrations.Files(dialect, schemaSuffix)
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true), goose.WithTableName(schemaTable)}
	gd := goose.DialectSQLite3
	if dialect == migrations.Postgres {
		gd = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(schemaLockID))
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gd, sqlDB, sub, opts...)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close() // the error that made us close is the one worth reporting
	}
}
