package memstore_test

import (
	"context"
	"errors"
	"testing"

	"svc/runner/sessions"
	"svc/runner/sessions/memstore"
	"svc/runner/sessions/sessionstest"
)

func TestStore(t *testing.T) {
	sessionstest.Run(t, func(t *testing.T) sessions.Store { return memstore.New() })
}

func TestLocks(t *testing.T) {
	var l memstore.Locks
	ctx := context.Background()
	release, err := l.TryLock(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "s1"); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("second TryLock err = %v, want ErrLocked", err)
	}
	other, err := l.TryLock(ctx, "s2")
	if err != nil {
		t.Fatalf("TryLock(other session): %v", err)
	}
	other()
	release()
	release() // idempotent
	again, err := l.TryLock(ctx, "s1")
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	again()
}

func TestBlobs(t *testing.T) {
	sessionstest.RunBlobs(t, func(*testing.T) sessions.Blobs { return &memstore.Blobs{} })
}
