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
	// the process environment); nil means none resolves.
	Env func(name string) (string, bool)
	// Platform is the platform database, migrated; nil when the runtime has none (svc dev).
	Platform *gorm.DB
}

// Open returns the backend of one agent's stores:
//
//   - no "stores" entry: the platform database (tables of migration 00009, rows of
//     p.AgentID), or memory when p.Platform is nil;
//   - backend "memory": memory, lost when the runtime stops (a url is not used);
//   - backend "sqlite" or "postgres" with a url: the database that env: reference names,
//     opened as migrations.Open does (postgres:// URLs; sqlite:PATH or a file path) and
//     brought up to date with the platform's store migrations (its own goose version table);
//     Close closes it;
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
	url, err := resolveURL(cfg, p.Env)
	if err != nil {
		return nil, err
	}
	db, err := migrations.OpenRaw(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open the stores database of %s (field %q): %w", cfg.URL, "stores.url", err)
	}
	if err := migrateSchema(ctx, db); err != nil {
		closeDB(db)
		return nil, fmt.Errorf("migrate the stores database of %s (field %q): %w", cfg.URL, "stores.url", err)
	}
	s := NewSQL(db, p.AgentID)
	s.owned = true
	return s, nil
}

// resolveURL resolves cfg.URL and checks that it names a database of cfg.Backend's kind.
func resolveURL(cfg *agent.StoresConfig, env func(string) (string, bool)) (string, error) {
	name, ok := strings.CutPrefix(cfg.URL, "env:")
	if !ok || name == "" {
		return "", fmt.Errorf("%w: field %q must be an env: reference such as \"env:NAME\"", ErrConfig, "stores.url")
	}
	var url string
	if env != nil {
		url, ok = env(name)
	}
	if !ok || url == "" {
		return "", fmt.Errorf("%w: field %q: %s is not set (an agent secret or an environment variable)", ErrConfig, "stores.url", cfg.URL)
	}
	isPG := strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
	switch {
	case cfg.Backend == agent.BackendPostgres && !isPG:
		return "", fmt.Errorf("%w: field %q: backend postgres needs a postgres:// URL, and %s holds something else", ErrConfig, "stores.url", cfg.URL)
	case cfg.Backend == agent.BackendSQLite && (isPG || strings.Contains(url, "://")):
		return "", fmt.Errorf("%w: field %q: backend sqlite needs sqlite:PATH or a file path, and %s holds a URL", ErrConfig, "stores.url", cfg.URL)
	}
	return url, nil
}

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
