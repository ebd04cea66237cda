package memsessions_test

import (
	"testing"

	"svc/runner/access"
	"svc/runner/access/memsessions"
	"svc/runner/access/sessionstest"
)

func TestConformance(t *testing.T) {
	sessionstest.Run(t, func(*testing.T) access.Sessions { return memsessions.New() })
}
