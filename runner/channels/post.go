package channels

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Answer is a platform's answer to a call Post made: what the Client's Send classifies.
type Answer struct {
	Status int
	Header http.Header
	// Body is the answer's body, at most MaxResponseBytes.
	Body []byte
}

// transport carries the calls of clients without their own http.Client: one pool for every
// channel of the process, keeping up to 64 idle connections per platform host (Go's default
// transport keeps 2, so replies sent at the same time closed and opened connections to the
// platform's API for most calls).
var transport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}()

// Post is the frame of a platform Client's Send: it refuses a request without an idempotency
// key (ErrNoIdempotencyKey), POSTs req.Body to url as JSON with the idempotency key
// (IdempotencyHeader) and header, through hc (a client with timeout when nil), and returns the
// answer. A failure to reach the platform or to read its answer is a retryable NetworkError;
// platform names the call in errors ("slack"), which never show url (it may hold a token).
func Post(ctx context.Context, hc *http.Client, timeout time.Duration, platform, url string, req Request, header http.Header) (Answer, error) {
	if req.IdempotencyKey == "" {
		return Answer{}, fmt.Errorf("%s %s: %w", platform, req.Method, ErrNoIdempotencyKey)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(req.Body))
	if err != nil {
		return Answer{}, fmt.Errorf("%s %s: build request: invalid API URL or token", platform, req.Method)
	}
	for name, values := range header {
		hreq.Header[name] = values
	}
	if hreq.Header.Get("Content-Type") == "" {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set(IdempotencyHeader, req.IdempotencyKey)
	if hc == nil {
		hc = &http.Client{Timeout: timeout, Transport: transport}
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return Answer{}, NetworkError(req.Method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return Answer{}, NetworkError(req.Method, err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}
