package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"svc/agent"
	"svc/runner/runtime"
)

// devPort is the default port of svc dev (spec §8).
const devPort = 3847

func devCommand() *cobra.Command {
	var port int
	var host, defaultModel string
	cmd := &cobra.Command{
		Use:   "dev [DIR]",
		Short: "Serve one agent's runtime straight from a source folder (sessions in memory; AUTH_TOKEN protects routes when set)",
		Args:  cobra.MaximumNArgs(1),
	}
	cmd.Flags().IntVar(&port, "port", devPort, "port to listen on")
	cmd.Flags().StringVar(&host, "host", "127.0.0.1", "address to listen on")
	cmd.Flags().StringVar(&defaultModel, "default-model", os.Getenv("SVC_DEFAULT_MODEL"), "provider/model used when svc.json names none (env SVC_DEFAULT_MODEL)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		dir := "."
		if len(args) == 1 {
			dir = args[0]
		}
		if port < 0 || port > 65535 {
			return fmt.Errorf("--port %d: want 0 to 65535", port)
		}
		a, err := agent.LoadDir(dir)
		if err != nil {
			return fmt.Errorf("load %s: %w", dir, err)
		}
		var model agent.ModelRef
		if defaultModel != "" {
			provider, name, ok := strings.Cut(defaultModel, "/")
			if !ok {
				return fmt.Errorf("--default-model %q: want provider/model", defaultModel)
			}
			model = agent.ModelRef{Provider: provider, Model: name}
		}
		log := newLogger(Config{LogLevel: "info"}, os.Stderr)
		rt, err := runtime.New(runtime.Options{
			Agent: a, AuthToken: os.Getenv("AUTH_TOKEN"), DefaultModel: model, Env: os.LookupEnv,
			Models: runtime.NewModels(os.LookupEnv, &http.Client{Timeout: 10 * time.Minute}), Logger: log,
		})
		if err != nil {
			return err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			if err := rt.Close(ctx); err != nil {
				log.Warn("close runtime", "err", err)
			}
		}()
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		return serve(cmd.Context(), addr, rt, func(bound net.Addr) {
			fmt.Fprintf(cmd.OutOrStdout(), "svc dev: %s %s on http://%s\n", a.Config.Name, a.Config.Version, bound)
		})
	}
	return cmd
}
