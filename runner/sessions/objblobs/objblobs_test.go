package objblobs_test

import (
	"testing"

	"svc/registry"
	"svc/registry/fsobjects"
	"svc/runner/sessions"
	"svc/runner/sessions/objblobs"
	"svc/runner/sessions/sessionstest"
)

func TestBlobs(t *testing.T) {
	sessionstest.RunBlobs(t, func(t *testing.T) sessions.Blobs {
		objects, err := fsobjects.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return objblobs.New(registry.Checked(objects), "ag1")
	})
}
