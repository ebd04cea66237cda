// Package handlerstest runs the handler sandbox in tests: a test binary is its own sandbox
// worker (package sandbox starts this executable), so every test package whose runtimes run
// handlers serves workers from its TestMain and shares one pool between its tests.
package handlerstest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"svc/runner/handlers"
	"svc/runner/sandbox"
)

var (
	mu   sync.Mutex
	pool *sandbox.Pool
)

// Main is a test package's TestMain: it serves as a sandbox worker when started as one, else
// runs the tests and closes the pool they shared.
func Main(m *testing.M) {
	handlers.ServeSandbox()
	code := m.Run()
	mu.Lock()
	if pool != nil {
		_ = pool.Close() // kills the workers; nothing to report
		pool = nil
	}
	mu.Unlock()
	os.Exit(code)
}

// Pool is the sandbox the package's tests share, started on first use. Only Main closes it.
func Pool() *sandbox.Pool {
	mu.Lock()
	defer mu.Unlock()
	if pool == nil {
		p, err := sandbox.New(sandbox.Config{})
		if err != nil {
			panic(fmt.Sprintf("handlerstest: %v", err))
		}
		pool = p
	}
	return pool
}
