package slack

import (
	"cmp"
	"context"
	"encoding/json"
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
	base := strings.TrimRight(cmp.Or(c.BaseURL, DefaultBaseURL), "/")
	header := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Authorization": {"Bearer " + c.Token}}
	ans, err := channels.Post(ctx, c.HTTP, DefaultTimeout, "slack", base+"/"+req.Method, req, header)
	if err != nil {
		return channels.SendResult{}, err
	}
	retryAfter := channels.ParseRetryAfter(ans.Header.Get("Retry-After"), time.Now())
	var answer struct {
		OK        bool   `json:"ok"`
		Error     string `json:"error"`
		TS        string `json:"ts"`
		MessageTS string `json:"message_ts"`
	}
	decodeErr := json.Unmarshal(ans.Body, &answer)
	if ans.Status < 200 || ans.Status > 299 {
		return channels.SendResult{}, channels.StatusError(req.Method, ans.Status, cmp.Or(answer.Error, http.StatusText(ans.Status)), retryAfter)
	}
	if decodeErr != nil {
		// A 2xx Slack did not write: a proxy's page. Nothing says the message was posted.
		return channels.SendResult{}, &channels.SendError{Method: req.Method, Retryable: true, Status: ans.Status, Message: "answer is not JSON: " + decodeErr.Error(), Err: decodeErr}
	}
	if !answer.OK {
		return channels.SendResult{}, apiError(req.Method, ans.Status, answer.Error, retryAfter)
	}
	return channels.SendResult{Status: ans.Status, MessageID: cmp.Or(answer.TS, answer.MessageTS)}, nil
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
