// Command svc builds, deploys and runs AI agents. `svc up` runs the whole platform in one process
// on embedded defaults; `svc api`, `svc worker` and `svc runner` run one role each for scale-out;
// `svc dev DIR` serves one agent from a folder; the other commands are clients of the platform API.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"svc/runner/handlers"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	handlers.ServeSandbox() // a handler sandbox worker (package sandbox) serves and exits here
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "svc:", err)
		os.Exit(1)
	}
}

// exitError ends the process with a code after its message was already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "svc",
		Short:         "Build, deploy and run AI agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		&cobra.Command{
			Use:   "version",
			Short: "Print the version",
			Args:  cobra.NoArgs,
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "svc", version) },
		},
		migrateCommand(),
		openapiCommand(),
	)
	root.AddCommand(serverCommands()...)
	root.AddCommand(clientCommands()...)
	return root
}
