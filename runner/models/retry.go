package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Retry defaults shared by the HTTP providers.
const (
	// DefaultMaxRetries is how many times a failed call is retried when the config says 0.
	DefaultMaxRetries = 3
	// DefaultRetryBaseDelay is the first backoff; each retry doubles it, with jitter.
	DefaultRetryBaseDelay = 200 * time.Millisecond
	// MaxRetryWait is the longest wait between two attempts. A Retry-After above it is not
	// waited for: the call fails at once with the APIError (Retryable, RetryAfter set).
	MaxRetryWait = 10 * time.Second
)

// retrier runs the attempts of one streamed call: it retries retryable *APIErrors (429, 5xx,
// connection failures) with exponential backoff and jitter, honours Retry-After up to
// MaxRetryWait, and never retries once an event was emitted.
//
// The Anthropic SDK's own retries are turned off (MaxRetries 0) because they differ from this
// contract: they start at 500 ms, retry 408 and 409 too, and only cover the HTTP exchange, not
// a stream that breaks before its first event.
type retrier struct {
	provider   string
	maxRetries int
	base       time.Duration
	secret     string // redacted from every message
}

// newRetrier applies the documented defaults: maxRetries 0 means DefaultMaxRetries and a
// negative one none; base 0 means DefaultRetryBaseDelay.
func newRetrier(provider string, maxRetries int, base time.Duration, secret string) retrier {
	switch {
	case maxRetries == 0:
		maxRetries = DefaultMaxRetries
	case maxRetries < 0:
		maxRetries = 0
	}
	if base <= 0 {
		base = DefaultRetryBaseDelay
	}
	return retrier{provider: provider, maxRetries: maxRetries, base: base, secret: secret}
}

// emitter forwards events to the caller's emit and remembers whether it was called and
// what it returned, so that the retrier knows when it may retry and which error is the caller's.
type emitter struct {
	emit    func(Event) error
	emitted bool
	err     error
}

// send passes ev to the caller.
func (e *emitter) send(ev Event) error {
	e.emitted = true
	if err := e.emit(ev); err != nil {
		e.err = err
		return err
	}
	return nil
}

// run calls attempt until it succeeds, fails for good, or ctx ends. An error of emit is
// returned as is; a cancelled ctx gives an error wrapping its cause.
func (r retrier) run(ctx context.Context, em *emitter, attempt func() error) error {
	for n := 0; ; n++ {
		err := attempt()
		if err == nil {
			return nil
		}
		if em.err != nil {
			return em.err
		}
		if ctx.Err() != nil {
			return r.cancelled(ctx)
		}
		var apiErr *APIError
		if !errors.As(err, &apiErr) || !apiErr.Retryable || em.emitted || n >= r.maxRetries {
			return err
		}
		wait := apiErr.RetryAfter
		if wait > MaxRetryWait {
			return err
		}
		if wait <= 0 {
			wait = r.backoff(n)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return r.cancelled(ctx)
		case <-timer.C:
		}
	}
}

// cancelled is the error of a call whose ctx ended.
func (r retrier) cancelled(ctx context.Context) error {
	return fmt.Errorf("models: %s: %w", r.provider, context.Cause(ctx))
}

// backoff is the wait before retry n+1: base·2ⁿ capped at MaxRetryWait, jittered down to half.
func (r retrier) backoff(n int) time.Duration {
	d := r.base << min(n, 20)
	if d <= 0 || d > MaxRetryWait {
		d = MaxRetryWait
	}
	half := d / 2
	return half + rand.N(half+1)
}

// httpError is the APIError of an HTTP error answer.
func (r retrier) httpError(status int, message string, header http.Header) *APIError {
	if message == "" {
		message = http.StatusText(status)
	}
	return &APIError{
		Provider:   r.provider,
		StatusCode: status,
		Message:    r.redact(message),
		Retryable:  status == http.StatusTooManyRequests || status >= 500,
		RetryAfter: retryAfter(header, time.Now()),
	}
}

// streamError is the APIError of a failure without an HTTP status (broken connection,
// malformed or truncated stream, error event inside the stream).
func (r retrier) streamError(message string, retryable bool) *APIError {
	return &APIError{Provider: r.provider, Message: r.redact(message), Retryable: retryable}
}

// transportError translates a failure to reach the API or to read its answer; connection
// errors are retryable, anything else (a stream that does not decode) is not.
func (r retrier) transportError(err error) *APIError {
	return r.streamError(err.Error(), isConnectionError(err))
}

// redact removes the API key from s.
func (r retrier) redact(s string) string {
	if len(r.secret) < 4 {
		return s
	}
	return strings.ReplaceAll(s, r.secret, "[redacted]")
}

// isConnectionError reports errors of the network rather than of the data.
func isConnectionError(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &netErr) || errors.As(err, &urlErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// retryAfter reads Retry-After-Ms (sent by OpenAI) or Retry-After (seconds or an HTTP date).
// It returns 0 when neither is set or valid.
func retryAfter(h http.Header, now time.Time) time.Duration {
	const maxWait = 24 * time.Hour // anything longer is as good as never
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			if ms >= float64(maxWait/time.Millisecond) {
				return maxWait
			}
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		switch {
		case !(s >= 0): // negative or NaN
			return 0
		case s >= maxWait.Seconds():
			return maxWait
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxWait)
	}
	return 0
}
