package models

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"fraction", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{"ms wins", map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{"bad ms falls back", map[string]string{"Retry-After-Ms": "soon", "Retry-After": "2"}, 2 * time.Second},
		{"date", map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"negative", map[string]string{"Retry-After": "-4"}, 0},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0},
		{"huge", map[string]string{"Retry-After": "1e300"}, 24 * time.Hour},
		{"huge ms", map[string]string{"Retry-After-Ms": "1e300"}, 24 * time.Hour},
		{"garbage", map[string]string{"Retry-After": "later"}, 0},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("%s: retryAfter = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	r := newRetrier("x", 0, 0, "")
	if r.maxRetries != DefaultMaxRetries || r.base != DefaultRetryBaseDelay {
		t.Fatalf("defaults = %d, %v", r.maxRetries, r.base)
	}
	for n := range 40 {
		full := min(DefaultRetryBaseDelay<<min(n, 20), MaxRetryWait)
		if n > 20 {
			full = MaxRetryWait
		}
		for range 20 {
			if d := r.backoff(n); d < full/2 || d > full {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, full/2, full)
			}
		}
	}
	if r := newRetrier("x", -1, 0, ""); r.maxRetries != 0 {
		t.Errorf("negative MaxRetries gives %d retries, want 0", r.maxRetries)
	}
}

func TestRedact(t *testing.T) {
	r := newRetrier("x", 0, 0, "sk-abcdef")
	if got := r.redact("bad key sk-abcdef!"); got != "bad key [redacted]!" {
		t.Errorf("redact = %q", got)
	}
	if got := newRetrier("x", 0, 0, "").redact("text"); got != "text" {
		t.Errorf("redact without key = %q", got)
	}
}
