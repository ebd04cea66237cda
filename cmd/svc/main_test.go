package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"svc/runner/handlers"
)

// envChildArgs, when set, makes the test binary act as the svc command: its value is the JSON
// list of arguments, run as main() runs them. Tests start such children to kill them (SIGKILL)
// and start fresh ones on the same data (durable_test.go).
const envChildArgs = "SVC_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	handlers.ServeSandbox() // this binary is the sandbox worker of the runtimes it starts
	if raw, ok := os.LookupEnv(envChildArgs); ok {
		os.Exit(runChild(raw))
	}
	os.Exit(m.Run())
}

// runChild runs svc with the JSON list of arguments raw and returns the exit code.
func runChild(raw string) int {
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", envChildArgs, err)
		return 2
	}
	// A child outlives no test binary, even one that died without its cleanups (a timeout).
	go func(parent int) {
		for range time.Tick(500 * time.Millisecond) {
			if os.Getppid() != parent {
				os.Exit(3)
			}
		}
	}(os.Getppid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "svc:", err)
		return 1
	}
	return 0
}
