package handlers

import (
	"context"
	"errors"
	"testing"
)

// A cancel or stop frame interrupts the call it names, and only that one: a frame about an
// earlier call of the worker (it comes on the control pipe, after that call ended) is moot.
func TestInterruptNamesItsCall(t *testing.T) {
	s := newServer(nil)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	s.loan, s.cancel = 7, cancel

	s.interrupt(6, errCancelled)
	if err := context.Cause(ctx); err != nil {
		t.Fatalf("a frame about call 6 interrupted call 7: %v", err)
	}
	s.interrupt(7, errStopped)
	if err := context.Cause(ctx); !errors.Is(err, errStopped) {
		t.Errorf("after a stop for call 7, the call's cause = %v, want errStopped", err)
	}
}
