package connections

import (
	"strings"
	"testing"
	"time"
)

// TestBucketEdges: 60 a minute with a burst of 2 gives 2 calls at once, then one a second; the
// wait is exact to the nanosecond.
func TestBucketEdges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBucket(60, 2)
	for i := range 2 {
		if ok, _ := b.take(t0); !ok {
			t.Fatalf("call %d of the burst refused", i+1)
		}
	}
	if ok, wait := b.take(t0); ok || wait != time.Second {
		t.Fatalf("third call = %v, wait %v; want refused, 1s", ok, wait)
	}
	if ok, wait := b.take(t0.Add(time.Second - time.Nanosecond)); ok || wait != time.Nanosecond {
		t.Fatalf("1ns early = %v, wait %v; want refused, 1ns", ok, wait)
	}
	if ok, _ := b.take(t0.Add(time.Second)); !ok {
		t.Fatal("call at 1s refused")
	}
	if ok, _ := b.take(t0.Add(time.Second)); ok {
		t.Fatal("second call at 1s allowed: only one token came back")
	}
	// A long pause refills to the burst, not beyond.
	later := t0.Add(time.Hour)
	for i := range 2 {
		if ok, _ := b.take(later); !ok {
			t.Fatalf("refilled call %d refused", i+1)
		}
	}
	if ok, _ := b.take(later); ok {
		t.Fatal("the bucket held more than its burst")
	}
}

func TestBucketNoBurst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBucket(7, 0) // burst 0 means 1
	if ok, _ := b.take(t0); !ok {
		t.Fatal("first call refused")
	}
	ok, wait := b.take(t0)
	if ok || wait != time.Minute/7 {
		t.Fatalf("second call = %v, wait %v; want refused, %v", ok, wait, time.Minute/7)
	}
	e := &RateLimitError{Connection: "crm", RequestsPerMinute: 7, Burst: 0, RetryAfter: wait}
	if e.RetrySeconds() != 9 || !strings.Contains(e.Error(), "retry in 9 seconds") || !strings.Contains(e.Error(), "connection crm") {
		t.Errorf("error = %q (%d s)", e, e.RetrySeconds())
	}
	if (&RateLimitError{RetryAfter: time.Nanosecond}).RetrySeconds() != 1 {
		t.Error("a wait under a second rounds to 0 seconds")
	}
}
