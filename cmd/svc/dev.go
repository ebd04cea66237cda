package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"svc/runner/durable/engine"
	"svc/runner/runtime"
	"svc/runner/sandbox"
)

func devCommand() *cobra.Command {
	var port int
	var host, defaultModel string
	cmd := &cobra.Command{
		Use:   "dev [DIR]",
		Short: "Serve one agent's runtime straight from a source folder (sessions in memory; AUTH_TOKEN protects routes when set)",
		Args:  cobra.MaximumNArgs(1),
	}
	cmd.Flags().IntVar(&port, "port", 3847, "port to listen on")
	cmd.Flags().StringVar(&host, "host", "127.0.0.1", "address to listen on")
	cmd.Flags().StringVar(&defaultModel, "default-model", os.Getenv("SVC_DEFAULT_MODEL"), "provider/model used when svc.json names none (env SVC_DEFAULT_MODEL)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		log := newLogger(Config{LogLevel: "info"}, os.Stderr)
		applyMemoryLimit(log)
		applyGCPercent(log)
		o := runtime.DevOptions{Dir: ".", AuthToken: os.Getenv("AUTH_TOKEN"), Logger: log}
		if len(args) == 1 {
			o.Dir = args[0]
		}
		if err := hasManifest(o.Dir); err != nil {
			return err
		}
		if port < 0 || port > 65535 {
			return fmt.Errorf("--port %d: want 0 to 65535", port)
		}
		if v, ok := os.LookupEnv("SVC_ALLOW_METADATA_ADDRESSES"); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("setting SVC_ALLOW_METADATA_ADDRESSES = %q: must be true or false", v)
			}
			o.AllowMetadataAddresses = b
		}
		if v, ok := os.LookupEnv("SVC_APPROVAL_TIMEOUT"); ok {
			d, err := ParseApprovalTimeout(v)
			if err != nil {
				return fmt.Errorf("setting SVC_APPROVAL_TIMEOUT = %q: %w", v, err)
			}
			o.ApprovalTimeout = d
		}
		if v, ok := os.LookupEnv("SVC_HANDLER_TIMEOUT"); ok {
			d, err := ParseHandlerTimeout(v)
			if err != nil {
				return fmt.Errorf("setting SVC_HANDLER_TIMEOUT = %q: %w", v, err)
			}
			o.HandlerTimeout = d
		}
		if v, ok := os.LookupEnv("SVC_PARK_AFTER"); ok {
			d, err := ParseParkAfter(v)
			if err != nil {
				return fmt.Errorf("setting SVC_PARK_AFTER = %q: %w", v, err)
			}
			o.ParkAfter = d
		}
		memoryMB, procs := sandbox.DefaultMemoryMB, sandbox.DefaultMaxProcs
		for _, s := range []struct {
			env    string
			lo, hi int
			dst    *int
		}{{"SVC_HANDLER_MEMORY_MB", MinHandlerMemoryMB, MaxHandlerMemoryMB, &memoryMB}, {"SVC_HANDLER_PROCS", 1, 256, &procs}} {
			if v, ok := os.LookupEnv(s.env); ok {
				n, err := strconv.Atoi(v)
				if err != nil || n < s.lo || n > s.hi {
					return fmt.Errorf("setting %s = %q: must be a whole number from %d to %d", s.env, v, s.lo, s.hi)
				}
				*s.dst = n
			}
		}
		pool, err := newSandbox(memoryMB, procs, log, nil)
		if err != nil {
			return err
		}
		defer func() { _ = pool.Close() }() // kills the workers; nothing to report
		o.Sandbox = pool
		if defaultModel != "" {
			m, err := runtime.ParseModel(defaultModel)
			if err != nil {
				return fmt.Errorf("--default-model (SVC_DEFAULT_MODEL): %w", err)
			}
			o.DefaultModel = m
		}
		tracer, shutdown, err := newTracer(cmd.Context(), "dev", nil)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = shutdown(sctx) // spans not flushed in 5 s are lost; the process is ending
		}()
		o.Tracer = tracer
		// Durable runs live in memory, woken by timers of this process: they end with it.
		runs := engine.New(engine.Config{HandlerTimeout: o.HandlerTimeout, Logger: log})
		if err := runs.Start(nil); err != nil {
			return err
		}
		o.Durable = runs
		rt, ag, err := runtime.NewDev(o)
		if err != nil {
			return err
		}
		closeRuntime := func(ctx context.Context) {
			// The engine first: its timers would otherwise wake runs on the closing runtime.
			if err := runs.Shutdown(ctx); err != nil {
				log.Warn("svc dev: stop the durable runs", "err", err)
			}
			if err := rt.Close(ctx); err != nil {
				log.Warn("svc dev: close the runtime", "err", err)
			}
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		err = serve(cmd.Context(), addr, rt, func(a net.Addr) {
			log.Info("svc dev: serving agent", "agent", ag.Config.Name, "version", ag.Config.Version, "url", "http://"+a.String(), "auth", o.AuthToken != "")
			fmt.Fprintf(cmd.OutOrStdout(), "svc dev: serving %s on http://%s\n", o.Dir, a)
		}, closeRuntime)
		if err != nil {
			closeRuntime(context.Background()) // serve failed before it stopped the runtime
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("svc dev: port %d of %s is in use (is another svc dev running?): pass another with --port N, or --port 0 for any free port", port, host)
			}
			return fmt.Errorf("svc dev: %w", err)
		}
		return nil
	}
	return cmd
}

// hasManifest checks that dir holds svc.json, and otherwise says where it looked and how to name
// the agent's folder.
func hasManifest(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	_, err = os.Stat(filepath.Join(abs, "svc.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("svc dev: no svc.json in %s: run svc dev in an agent's folder, or name it: svc dev DIR", abs)
	case err != nil:
		return fmt.Errorf("svc dev: read %s: %w", filepath.Join(abs, "svc.json"), err)
	}
	return nil
}
