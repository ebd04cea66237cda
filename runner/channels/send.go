package channels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// IdempotencyHeader carries a Request's idempotency key on every call to a platform. Slack and
// Telegram ignore it (neither has server-side idempotency); the fakes of channelstest use it to
// report a reply sent twice, and a webhook receiver can dedupe on it.
const IdempotencyHeader = "X-Svc-Idempotency-Key"

// MaxResponseBytes bounds how much of a platform's answer a Client reads.
const MaxResponseBytes = 1 << 20

// ErrNoIdempotencyKey is returned by a Client's Send for a Request without IdempotencyKey: the
// outbox must name every call so that a retry can be told from a second reply.
var ErrNoIdempotencyKey = errors.New("channels: request has no idempotency key")

// Request is one call of a platform's API, as Render makes it: a plain JSON value so that the
// outbox can store it before it is sent and send it again after a crash.
type Request struct {
	// Method is the API method: "chat.postMessage", "sendMessage", "answerCallbackQuery"; the
	// webhook's only method is "reply".
	Method string `json:"method"`
	// Body is the method's JSON body.
	Body json.RawMessage `json:"body"`
	// IdempotencyKey names this call across retries; the outbox sets it (Render leaves it empty),
	// for example "<outbox entry id>/<index>".
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// NewRequest marshals body into a Request for method, leaving <, > and & as they are (the
// platforms read JSON, not HTML).
func NewRequest(method string, body any) (Request, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return Request{}, fmt.Errorf("encode %s: %w", method, err)
	}
	return Request{Method: method, Body: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))}, nil
}

// SendResult is a platform's answer to a call that succeeded.
type SendResult struct {
	// Status is the HTTP status.
	Status int
	// MessageID is the message the call made or changed, when the platform says: Slack's ts,
	// Telegram's message_id.
	MessageID string
}

// SendError is a call that failed, and what the outbox should do about it:
//
//   - Retryable with RetryAfter > 0: rate limited (429, Slack's ratelimited): wait RetryAfter;
//   - Retryable with RetryAfter == 0: a server error (5xx) or a network failure: retry with backoff;
//   - not Retryable: the platform refused the call (other 4xx, Slack's channel_not_found):
//     retrying cannot help.
//
// Status is the HTTP status (0 when no answer arrived); Message is the platform's error
// ("ratelimited", "Bad Request: chat not found") or the network error's text. Err is the
// underlying cause when there is one (a network error, the context's).
type SendError struct {
	Method     string
	Retryable  bool
	RetryAfter time.Duration
	Status     int
	Message    string
	Err        error
}

// Error implements error.
func (e *SendError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "channels: %s failed", e.Method)
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	switch {
	case e.Retryable && e.RetryAfter > 0:
		fmt.Fprintf(&b, "; retry after %s", e.RetryAfter)
	case e.Retryable:
		b.WriteString("; retryable")
	default:
		b.WriteString("; permanent")
	}
	return b.String()
}

// Unwrap returns the underlying cause, if any.
func (e *SendError) Unwrap() error { return e.Err }

// StatusError classifies an HTTP failure status of method with the platform's message: 429
// retries after retryAfter (at least a second when the platform gave none), 5xx and 408 retry
// with backoff, any other status is permanent.
func StatusError(method string, status int, message string, retryAfter time.Duration) *SendError {
	e := &SendError{Method: method, Status: status, Message: message}
	switch {
	case status == http.StatusTooManyRequests:
		e.Retryable, e.RetryAfter = true, max(retryAfter, time.Second)
	case status >= 500, status == http.StatusRequestTimeout:
		e.Retryable = true
	}
	return e
}

// NetworkError is a call of method that got no answer: retryable, since nothing says the platform
// refused it. A cancelled ctx is reported the same way; errors.Is(err, context.Canceled) tells.
// The URL of a *url.Error is dropped: Telegram's carries the bot token.
func NetworkError(method string, err error) *SendError {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return &SendError{Method: method, Retryable: true, Message: err.Error(), Err: err}
}

// ParseRetryAfter reads a Retry-After header: delay-seconds, or an HTTP date (taken relative to
// now). Anything else, or nothing, is 0.
func ParseRetryAfter(value string, now time.Time) time.Duration {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0
	}
	if n, err := strconv.Atoi(value); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(value); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}
