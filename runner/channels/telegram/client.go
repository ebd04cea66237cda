package telegram

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"svc/runner/channels"
)

// DefaultBaseURL is Telegram's Bot API; SVC_TELEGRAM_API_URL replaces it (tests, proxies, a local
// Bot API server).
const DefaultBaseURL = "https://api.telegram.org"

// DefaultTimeout bounds a call when Client.HTTP is nil.
const DefaultTimeout = 30 * time.Second

// Client posts Requests to Telegram's Bot API with the bot token. It holds no state of its own
// and is safe for concurrent use. Errors never show the token (it is part of the URL).
type Client struct {
	// BaseURL is the Bot API's root, without a trailing slash; empty means DefaultBaseURL.
	BaseURL string
	// Token is the bot token from @BotFather ("123456789:AA...").
	Token string
	// HTTP makes the calls; nil means a client with DefaultTimeout.
	HTTP *http.Client
}

// Send posts req to <BaseURL>/bot<Token>/<req.Method> with req's idempotency key
// (channels.IdempotencyHeader; Telegram ignores it). It returns the message's message_id on
// success, or a *channels.SendError: error_code 429 retries after parameters.retry_after (or the
// Retry-After header); 5xx and a network failure retry with backoff; any other error ("Bad
// Request: chat not found", "Forbidden: bot was blocked by the user") is permanent. A request
// without an idempotency key is refused with channels.ErrNoIdempotencyKey.
func (c *Client) Send(ctx context.Context, req channels.Request) (channels.SendResult, error) {
	base := strings.TrimRight(cmp.Or(c.BaseURL, DefaultBaseURL), "/")
	ans, err := channels.Post(ctx, c.HTTP, DefaultTimeout, "telegram", base+"/bot"+c.Token+"/"+req.Method, req, nil)
	if err != nil {
		return channels.SendResult{}, err
	}
	var answer struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Parameters  *struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	decodeErr := json.Unmarshal(ans.Body, &answer)
	if decodeErr == nil && answer.OK && ans.Status >= 200 && ans.Status <= 299 {
		var sent struct {
			MessageID int64 `json:"message_id"`
		}
		if json.Unmarshal(answer.Result, &sent) == nil && sent.MessageID != 0 {
			return channels.SendResult{Status: ans.Status, MessageID: strconv.FormatInt(sent.MessageID, 10)}, nil
		}
		return channels.SendResult{Status: ans.Status}, nil
	}
	status := ans.Status
	if status >= 200 && status <= 299 {
		if decodeErr != nil {
			// A 2xx Telegram did not write: a proxy's page. Nothing says the message was sent.
			return channels.SendResult{}, &channels.SendError{Method: req.Method, Retryable: true, Status: status, Message: "answer is not JSON: " + decodeErr.Error(), Err: decodeErr}
		}
		status = cmp.Or(answer.ErrorCode, http.StatusBadRequest) // ok false with 200: trust error_code
	}
	retryAfter := channels.ParseRetryAfter(ans.Header.Get("Retry-After"), time.Now())
	if answer.Parameters != nil && answer.Parameters.RetryAfter > 0 {
		retryAfter = time.Duration(answer.Parameters.RetryAfter) * time.Second
	}
	return channels.SendResult{}, channels.StatusError(req.Method, status, cmp.Or(answer.Description, http.StatusText(status)), retryAfter)
}
