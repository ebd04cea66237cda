package runtime

import (
	"context"
	"testing"
	"time"
)

// TestAfterAcksQuiet: a turn waits while a delivery is acknowledged and for ackQuiet after the
// last one, a delivery that comes during the quiet makes it wait again, and the bound and
// the context end the wait.
func TestAfterAcksQuiet(t *testing.T) {
	h := &Channels{}
	h.AfterAcks(t.Context(), time.Hour) // never a delivery: at once

	h.ackStart()
	returned := make(chan time.Time, 1)
	go func() { h.AfterAcks(t.Context(), time.Hour); returned <- time.Now() }()
	select {
	case <-returned:
		t.Fatal("AfterAcks returned while a delivery was being acknowledged")
	case <-time.After(2 * ackQuiet):
	}
	h.ackEnd()
	ended := time.Now()
	if at := <-returned; at.Sub(ended) < ackQuiet {
		t.Errorf("AfterAcks returned %s after the last acknowledgement, before the quiet of %s", at.Sub(ended), ackQuiet)
	}

	// A delivery during the quiet: the wait goes on until it is answered, and the quiet after.
	h.ackStart()
	h.ackEnd()
	go func() { h.AfterAcks(t.Context(), time.Hour); returned <- time.Now() }()
	h.ackStart()
	select {
	case <-returned:
		t.Fatal("AfterAcks returned while a delivery that came during the quiet was being acknowledged")
	case <-time.After(2 * ackQuiet):
	}
	h.ackEnd()
	ended = time.Now()
	if at := <-returned; at.Sub(ended) < ackQuiet {
		t.Errorf("AfterAcks returned %s after the last acknowledgement, before the quiet of %s", at.Sub(ended), ackQuiet)
	}

	// The bound, and the context, end a wait for a delivery that is never answered.
	h.ackStart()
	defer h.ackEnd()
	start := time.Now()
	h.AfterAcks(t.Context(), 3*ackQuiet)
	if waited := time.Since(start); waited < 3*ackQuiet {
		t.Errorf("AfterAcks returned after %s, before its bound of %s", waited, 3*ackQuiet)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h.AfterAcks(ctx, time.Hour)
}
