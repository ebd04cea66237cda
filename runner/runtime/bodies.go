package runtime

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// Body memory: what large request bodies in flight may take.
const (
	DefaultBodyMemory = 512 << 20 // bytes of memory for large bodies in flight, per process

	// bodyWeight is the memory a request body is counted for, per byte of body: the raw body,
	// its decoded strings and attachments, the history rows and the answer. Measured with
	// scripts/largechats.sh, one 49 MiB chat takes about 13 times its size when the echo model
	// repeats its text, about 4.5 times when it is attachments.
	bodyWeight = 12
	// smallBody is the size under which a body is not counted at all.
	smallBody = 1 << 20
	// DefaultBodyWait is how long a large body waits for memory before the request is refused.
	DefaultBodyWait = 30 * time.Second
)

// BodyBudget bounds the memory that large request bodies take while their requests run: a body
// over 1 MiB is counted at twelve times its size (its Content-Length, or the 50 MB limit when it
// has none) from before it is read until its request ends, and waits up to 30 s for room, then
// gets 503 server_busy. One budget is shared by every runtime of a process. It is safe for
// concurrent use.
type BodyBudget struct {
	sem  *semaphore.Weighted
	size int64
	wait time.Duration
}

// NewBodyBudget returns a budget of maxBytes (DefaultBodyMemory when 0 or less) where a body
// waits at most wait for room (DefaultBodyWait when 0 or less).
func NewBodyBudget(maxBytes int64, wait time.Duration) *BodyBudget {
	if maxBytes <= 0 {
		maxBytes = DefaultBodyMemory
	}
	if wait <= 0 {
		wait = DefaultBodyWait
	}
	return &BodyBudget{sem: semaphore.NewWeighted(maxBytes), size: maxBytes, wait: wait}
}

// admit takes room for r's body, or returns why not; release gives it back.
func (b *BodyBudget) admit(r *http.Request) (release func(), err error) {
	n := r.ContentLength
	if n < 0 || n > MaxBodyBytes {
		n = MaxBodyBytes
	}
	if r.Method == http.MethodGet || n < smallBody {
		return func() {}, nil
	}
	w := min(n*bodyWeight, b.size)
	ctx, cancel := context.WithTimeout(r.Context(), b.wait)
	defer cancel()
	if err := b.sem.Acquire(ctx, w); err != nil {
		return nil, &APIError{Code: CodeBusy, Message: fmt.Sprintf("the runtime is handling other large requests (a %d-byte body waits for memory); retry in a few seconds", r.ContentLength)}
	}
	return func() { b.sem.Release(w) }, nil
}
