package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"svc/agent"
	"svc/runner/sessions/memstore"
)

// DefaultDevAddr is where `svc dev` listens by default (spec §8: port 3847).
const DefaultDevAddr = "127.0.0.1:3847"

// DevOptions configure ServeDev. Zero values are documented defaults.
type DevOptions struct {
	// Dir is the agent source folder; "" means ".".
	Dir string
	// Addr is the listen address; "" means DefaultDevAddr.
	Addr string
	// AuthToken protects the routes when set (AUTH_TOKEN).
	AuthToken string
	// DefaultModel applies when svc.json has no models.main (SVC_DEFAULT_MODEL); zero means echo.
	DefaultModel agent.ModelRef
	// Env resolves env: references and provider variables; nil means os.LookupEnv.
	Env func(name string) (string, bool)
	// MaxTurns and IdleTimeout are as in Options.
	MaxTurns    int
	IdleTimeout time.Duration
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
	// Ready, when set, is called with the base URL once the listener is open.
	Ready func(url string)
}

// ShutdownTimeout bounds how long ServeDev waits for open streams when it stops.
const ShutdownTimeout = 10 * time.Second

// ServeDev is `svc dev`: it loads one agent from a folder, serves its runtime with sessions
// in memory until ctx is done, then shuts down with a fresh, bounded context. An invalid agent
// tree is an error listing every problem (agent.Problems). Signals are the caller's.
func ServeDev(ctx context.Context, o DevOptions) error {
	dir := o.Dir
	if dir == "" {
		dir = "."
	}
	ag, err := agent.LoadDir(dir)
	if err != nil {
		return err
	}
	env := o.Env
	if env == nil {
		env = os.LookupEnv
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	rt, err := New(Options{
		Agent: ag, Version: ag.Config.Version, DeployID: "dev", Sessions: memstore.New(),
		AuthToken: o.AuthToken, Models: NewModels(env, nil), DefaultModel: o.DefaultModel, Env: env,
		MaxTurns: o.MaxTurns, IdleTimeout: o.IdleTimeout, Logger: log,
	})
	if err != nil {
		return err
	}
	addr := o.Addr
	if addr == "" {
		addr = DefaultDevAddr
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		_ = rt.Close(context.Background()) // nothing started yet; the listen error is the one to report
		return fmt.Errorf("svc dev: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: rt, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	log.Info("svc dev: serving agent", "agent", ag.Config.Name, "version", ag.Config.Version, "url", url, "auth", o.AuthToken != "")
	if o.Ready != nil {
		o.Ready(url)
	}
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	_ = rt.Close(sctx) // ends event streams so that Shutdown need not wait for them
	if serr := srv.Shutdown(sctx); serr != nil {
		_ = srv.Close() // streams still open after the bound: cut them
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("svc dev: %w", err)
	}
	return nil
}
