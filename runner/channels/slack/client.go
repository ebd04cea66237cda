package slack

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"svc/runner/channels"
)

// DefaultBaseURL is Slack's Web API; SVC_SLACK_API_URL replaces it (tests, proxies).
const DefaultBaseURL = "https://slack.com/api"

// DefaultTimeout bounds a call when Client.HTTP is nil.
const DefaultTimeout = 30 * time.Second

// Client posts Requests to Slack's Web API with the bot token. It holds no state of its own and
// is safe for concurrent use.
type Client struct {
	// BaseURL is the Web API's root, without a trailing slash; empty means DefaultBaseURL.
	BaseURL string
	// Token is the bot token (xoxb-...), sent as Authorization: Bearer.
	Token string
	// HTTP makes the calls; nil means a client with DefaultTimeout.
	HTTP *http.Client
}

// Send posts req to <BaseURL>/<req.Method> with the bot token and req's idempotency key
// (channels.IdempotencyHeader; Slack ignores it). It returns the message's ts on success, or a
// *channels.SendError: HTTP 429 and {"ok":false,"error":"ratelimited"} retry after the
// Retry-After header; 5xx, a network failure and Slack's internal errors retry with backoff;
// any other error (channel_not_found, not_in_channel, invalid_auth, msg_too_long...) is
// permanent. A request without an idempotency key is refused with channels.ErrNoIdempotencyKey.
func (c *Client) Send(ctx context.Context, req channels.Request) (channels.SendResult, error) {
	if req.IdempotencyKey == "" {
		return channels.SendResult{}, fmt.Errorf("slack %s: %w", req.Method, channels.ErrNoIdempotencyKey)
	}
	base := strings.TrimRight(cmp.Or(c.BaseURL, DefaultBaseURL), "/")
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/"+req.Method, bytes.NewReader(req.Body))
	if err != nil {
		return channels.SendResult{}, fmt.Errorf("slack %s: build request: %w", req.Method, err)
	}
	hreq.Header.Set("Content-Type", "application/json; charset=utf-8")
	hreq.Header.Set("Authorization", "Bearer "+c.Token)
	hreq.Header.Set(channels.IdempotencyHeader, req.IdempotencyKey)
	httpClient := c.HTTP
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := httpClient.Do(hreq)
	if err != nil {
		return channels.SendResult{}, channels.NetworkError(req.Method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, channels.MaxResponseBytes))
	if err != nil {
		return channels.SendResult{}, channels.NetworkError(req.Method, err)
	}
	retryAfter := channels.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	var answer struct {
		OK        bool   `json:"ok"`
		Error     string `json:"error"`
		TS        string `json:"ts"`
		MessageTS string `json:"message_ts"`
	}
	decodeErr := json.Unmarshal(data, &answer)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return channels.SendResult{}, channels.StatusError(req.Method, resp.StatusCode, cmp.Or(answer.Error, http.StatusText(resp.StatusCode)), retryAfter)
	}
	if decodeErr != nil {
		// A 2xx Slack did not write: a proxy's page. Nothing says the message was posted.
		return channels.SendResult{}, &channels.SendError{Method: req.Method, Retryable: true, Status: resp.StatusCode, Message: "answer is not JSON: " + decodeErr.Error(), Err: decodeErr}
	}
	if !answer.OK {
		return channels.SendResult{}, apiError(req.Method, resp.StatusCode, answer.Error, retryAfter)
	}
	return channels.SendResult{Status: resp.StatusCode, MessageID: cmp.Or(answer.TS, answer.MessageTS)}, nil
}

// apiError classifies Slack's {"ok":false,"error":code}, which Slack answers with HTTP 200.
func apiError(method string, status int, code string, retryAfter time.Duration) *channels.SendError {
	e := &channels.SendError{Method: method, Status: status, Message: cmp.Or(code, "ok false without error")}
	switch code {
	case "ratelimited", "rate_limited":
		e.Retryable, e.RetryAfter = true, max(retryAfter, time.Second)
	case "internal_error", "fatal_error", "service_unavailable", "request_timeout":
		e.Retryable = true
	}
	return e
}
