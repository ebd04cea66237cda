package handlers_test

import (
	"testing"

	"svc/runner/handlers"
	"svc/runner/handlers/handlerstest"
)

func TestMain(m *testing.M) { handlerstest.Main(m) }

// sandboxed is opts with the tests' sandbox.
func sandboxed(opts handlers.Options) handlers.Options {
	if opts.Sandbox == nil {
		opts.Sandbox = handlerstest.Pool()
	}
	return opts
}
