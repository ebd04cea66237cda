package runtime_test

import (
	"testing"

	"svc/runner/handlers/handlerstest"
)

// TestMain serves the handler sandbox's workers: this test binary is their executable.
func TestMain(m *testing.M) { handlerstest.Main(m) }
