// Package channelstest holds what the tests of the messaging channels share: fake Slack and
// Telegram Web APIs and a fake webhook receiver on 127.0.0.1 that speak the platforms' request
// and response shapes, record every call and fail on demand; deliveries signed exactly as the
// platforms sign them; and the payload fixtures of runner/channels/testdata.
package channelstest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// Call is one request a fake received.
type Call struct {
	// Method is the API method ("chat.postMessage", "sendMessage"; "reply" for the webhook).
	Method string
	// Body is the request's body as sent.
	Body json.RawMessage
	// IdempotencyKey is the X-Svc-Idempotency-Key header ("" when absent).
	IdempotencyKey string
	// Time is when the fake received it.
	Time time.Time
	// Status is the HTTP status the fake answered.
	Status int
	// OK is true when the fake acknowledged the call (the platform's success answer).
	OK bool
}

// failure is one answer the fake gives instead of its normal one.
type failure struct {
	status     int
	retryAfter time.Duration
	code       string // Slack's error code answered with HTTP 200
}

// Recorder is the part every fake shares: the calls it received and the failures it was told to
// answer. Its methods are safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	calls []Call
	fails []failure
}

// FailNext makes the next n calls fail with HTTP status: 429 carries retryAfter as the platform
// does (Slack's Retry-After header, Telegram's parameters.retry_after), 5xx and 4xx the
// platform's error body. Failed calls are recorded, not acknowledged.
func (r *Recorder) FailNext(n, status int, retryAfter time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range n {
		r.fails = append(r.fails, failure{status: status, retryAfter: retryAfter})
	}
}

// Calls returns a copy of every call received, in order.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Acknowledged returns the calls of method the fake acknowledged, in order; every method when
// method is "".
func (r *Recorder) Acknowledged(method string) []Call {
	var out []Call
	for _, c := range r.Calls() {
		if c.OK && (method == "" || c.Method == method) {
			out = append(out, c)
		}
	}
	return out
}

// Duplicates returns the idempotency keys acknowledged more than once: a reply sent twice.
func (r *Recorder) Duplicates() []string {
	seen := map[string]int{}
	var dups []string
	for _, c := range r.Acknowledged("") {
		if c.IdempotencyKey == "" {
			continue
		}
		if seen[c.IdempotencyKey]++; seen[c.IdempotencyKey] == 2 {
			dups = append(dups, c.IdempotencyKey)
		}
	}
	return dups
}

// nextFailure takes the next planned failure, if any.
func (r *Recorder) nextFailure() (failure, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fails) == 0 {
		return failure{}, false
	}
	f := r.fails[0]
	r.fails = r.fails[1:]
	return f, true
}

// record appends a call answered with status.
func (r *Recorder) record(req *http.Request, method string, body []byte, status int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, Call{
		Method: method, Body: json.RawMessage(body), IdempotencyKey: req.Header.Get("X-Svc-Idempotency-Key"),
		Time: time.Now(), Status: status, OK: ok,
	})
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client gone: nothing to tell
}

// Fixture returns the payload fixture name ("slack/app_mention.json") of
// runner/channels/testdata, failing t when it cannot be read.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("channelstest: cannot locate its own source file")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "testdata", filepath.FromSlash(name)))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return data
}
