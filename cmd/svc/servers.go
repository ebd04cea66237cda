package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"svc/migrations"
	"svc/runner/park"
)

// shutdownGrace bounds a graceful shutdown: in-flight requests and builds get this long.
const shutdownGrace = 30 * time.Second

func migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations (DATABASE_URL, or the SQLite database of the data dir)",
		Args:  cobra.NoArgs,
	}
	addFlags(cmd.Flags(), forMigrate)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(cmd.Flags())
		if err != nil {
			return err
		}
		url := cfg.DatabaseURL
		if url == "" {
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return fmt.Errorf("setting SVC_DATA_DIR: %w", err)
			}
			path := filepath.Join(cfg.DataDir, "svc.db")
			if err := migrations.RestrictSQLiteFiles(path); err != nil { // svc's own: private
				return err
			}
			url = "sqlite:" + path
		}
		db, err := migrations.Open(cmd.Context(), url)
		if err != nil {
			return err
		}
		v, err := migrations.Version(cmd.Context(), db)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "database at migration %d\n", v)
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		return sqlDB.Close()
	}
	return cmd
}

// serve listens on addr and runs serveListener; ready, when not nil, learns the bound address.
func serve(ctx context.Context, addr string, h http.Handler, ready func(net.Addr), stopping func(context.Context)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	return serveListener(ctx, ln, h, stopping)
}

// serveListener serves h on ln until ctx is done, then shuts down with a fresh, bounded ctx:
// stopping, when not nil, is called first with that ctx, to end what would keep connections open
// (runtimes' event streams), so that the shutdown need not wait for them. It is the one server
// lifecycle of every role and of svc dev.
//
// The listener is a park.Listener, so that runtimes park their long event streams off the
// server's connections (runner/park) and give the connections back when the streams end;
// the shutdown waits for parked streams as for the server's own connections.
func serveListener(ctx context.Context, ln net.Listener, h http.Handler, stopping func(context.Context)) error {
	pl := park.NewListener(ln)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ConnContext: pl.ConnContext}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(pl) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if stopping != nil {
		stopping(shutdownCtx)
	}
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close() // the deadline passed: cut what is left
	}
	_ = pl.Shutdown(shutdownCtx) // past the deadline it cuts the parked streams' connections
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// runGroup runs fns until the first fails or ctx is done, and waits for all of them.
func runGroup(ctx context.Context, fns ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, fn := range fns {
		g.Go(func() error { return fn(gctx) })
	}
	return g.Wait()
}
