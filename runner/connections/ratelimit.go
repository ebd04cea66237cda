package connections

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// RateLimitError is the error of a call refused by its connection's rate limit
// (access.json rateLimit). RetryAfter is when a call may succeed again, rounded up to whole
// seconds in the message.
type RateLimitError struct {
	Connection        string
	RequestsPerMinute int
	Burst             int
	RetryAfter        time.Duration
}

func (e *RateLimitError) Error() string {
	unit := "seconds"
	if e.RetrySeconds() == 1 {
		unit = "second"
	}
	return fmt.Sprintf("rate limit of connection %s reached (access.json rateLimit: %d requests per minute, burst %d); retry in %d %s",
		e.Connection, e.RequestsPerMinute, e.Burst, e.RetrySeconds(), unit)
}

// RetrySeconds is RetryAfter in whole seconds, rounded up (at least 1).
func (e *RateLimitError) RetrySeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// bucket is a token bucket: it holds at most burst tokens, gains requestsPerMinute tokens a
// minute, and starts full; a call takes one token. A burst of 0 means 1 (no bursts). It is
// kept as the generic cell rate algorithm, in whole nanoseconds, so that the edges are exact:
// tat is when the bucket would be full again.
type bucket struct {
	mu        sync.Mutex
	interval  time.Duration // time to gain one token
	tolerance time.Duration // (burst-1) intervals: how far tat may run ahead of now
	tat       time.Time
}

func newBucket(requestsPerMinute, burst int) *bucket {
	interval := time.Minute / time.Duration(requestsPerMinute)
	return &bucket{interval: interval, tolerance: time.Duration(max(1, burst)-1) * interval}
}

// take takes a token at now; when there is none it returns how long until there is one.
func (b *bucket) take(now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tat := b.tat
	if tat.Before(now) {
		tat = now
	}
	if earliest := tat.Add(-b.tolerance); earliest.After(now) {
		return false, earliest.Sub(now)
	}
	b.tat = tat.Add(b.interval)
	return true, 0
}
