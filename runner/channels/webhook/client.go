package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"svc/runner/channels"
)

// DefaultTimeout bounds a call when Client.HTTP is nil.
const DefaultTimeout = 30 * time.Second

// Client posts replies to the webhook's replyUrl, signed with its secret. It holds no state of
// its own and is safe for concurrent use.
type Client struct {
	// URL is the replyUrl.
	URL string
	// Secret is the webhook's secret, the same that signs deliveries.
	Secret string
	// HTTP makes the calls; nil means a client with DefaultTimeout.
	HTTP *http.Client
	// Now is the clock of X-Svc-Timestamp; nil means time.Now.
	Now func() time.Time
}

// Send posts req's body to URL signed as deliveries are (X-Svc-Timestamp, X-Svc-Signature), with
// its idempotency key as X-Svc-Event-Id and X-Svc-Idempotency-Key. Any 2xx is success; otherwise
// a *channels.SendError: 429 retries after Retry-After, 5xx and a network failure retry with
// backoff, any other status is permanent. A request without an idempotency key is refused with
// channels.ErrNoIdempotencyKey.
func (c *Client) Send(ctx context.Context, req channels.Request) (channels.SendResult, error) {
	if req.IdempotencyKey == "" {
		return channels.SendResult{}, fmt.Errorf("webhook %s: %w", req.Method, channels.ErrNoIdempotencyKey)
	}
	if c.URL == "" || c.Secret == "" {
		return channels.SendResult{}, &channels.SendError{Method: req.Method, Message: "replyUrl or secret not configured"}
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	ts := now().Unix()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(req.Body))
	if err != nil {
		return channels.SendResult{}, &channels.SendError{Method: req.Method, Message: "replyUrl: " + err.Error(), Err: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	hreq.Header.Set(SignatureHeader, Sign(c.Secret, ts, req.Body))
	hreq.Header.Set(EventIDHeader, req.IdempotencyKey)
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
	data, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return channels.SendResult{}, channels.NetworkError(req.Method, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return channels.SendResult{Status: resp.StatusCode}, nil
	}
	message := strings.TrimSpace(string(data))
	if message == "" {
		message = http.StatusText(resp.StatusCode)
	}
	return channels.SendResult{}, channels.StatusError(req.Method, resp.StatusCode, message, channels.ParseRetryAfter(resp.Header.Get("Retry-After"), now()))
}
