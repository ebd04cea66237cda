package channelstest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Delivery is a request as a platform sends it: headers and the raw body.
type Delivery struct {
	Header http.Header
	Body   []byte
}

// NewRequest is d as a POST to target, ready for a handler or an http.Client.
func (d Delivery) NewRequest(ctx context.Context, target string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(d.Body))
	if err != nil {
		return nil, err
	}
	req.Header = d.Header.Clone()
	return req, nil
}

// DeliveryOption changes a delivery.
type DeliveryOption func(*Delivery)

// WithRetryNum marks a Slack delivery as its n-th retry (X-Slack-Retry-Num, with
// X-Slack-Retry-Reason http_timeout), as Slack resends an event not answered within 3 seconds.
func WithRetryNum(n int) DeliveryOption {
	return func(d *Delivery) {
		d.Header.Set("X-Slack-Retry-Num", strconv.Itoa(n))
		d.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
}

// SlackDelivery is an Events API delivery of payload (JSON) sent at ts, signed with the app's
// signing secret as Slack signs it: X-Slack-Request-Timestamp and X-Slack-Signature "v0=" + hex
// HMAC-SHA256 of "v0:<timestamp>:<body>".
func SlackDelivery(secret string, payload []byte, ts time.Time, opts ...DeliveryOption) Delivery {
	d := Delivery{Header: http.Header{}, Body: payload}
	d.Header.Set("Content-Type", "application/json")
	return signSlack(d, secret, ts, opts)
}

// SlackInteractiveDelivery is an interactive delivery (block_actions) of payload (JSON) sent at
// ts: form-encoded as payload=<json>, signed as SlackDelivery signs.
func SlackInteractiveDelivery(secret string, payload []byte, ts time.Time, opts ...DeliveryOption) Delivery {
	d := Delivery{Header: http.Header{}, Body: []byte(url.Values{"payload": {string(payload)}}.Encode())}
	d.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return signSlack(d, secret, ts, opts)
}

func signSlack(d Delivery, secret string, ts time.Time, opts []DeliveryOption) Delivery {
	d.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	stamp := strconv.FormatInt(ts.Unix(), 10)
	d.Header.Set("X-Slack-Request-Timestamp", stamp)
	d.Header.Set("X-Slack-Signature", "v0="+hexMAC(secret, "v0:"+stamp+":", d.Body))
	for _, o := range opts {
		o(&d)
	}
	return d
}

// TelegramDelivery is a webhook delivery of update (JSON) as Telegram sends it to a webhook set
// with secret_token: the secret in X-Telegram-Bot-Api-Secret-Token.
func TelegramDelivery(secretToken string, update []byte, opts ...DeliveryOption) Delivery {
	d := Delivery{Header: http.Header{}, Body: update}
	d.Header.Set("Content-Type", "application/json")
	d.Header.Set("X-Telegram-Bot-Api-Secret-Token", secretToken)
	for _, o := range opts {
		o(&d)
	}
	return d
}

// WebhookDelivery is a signed generic webhook delivery of body sent at ts, as CONTRACT §9 signs
// an event: X-Svc-Timestamp (unix seconds) and X-Svc-Signature "sha256=" + hex HMAC-SHA256 of
// "<timestamp>.<body>".
func WebhookDelivery(secret string, body []byte, ts time.Time, opts ...DeliveryOption) Delivery {
	d := Delivery{Header: http.Header{}, Body: body}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	d.Header.Set("Content-Type", "application/json")
	d.Header.Set("X-Svc-Timestamp", stamp)
	d.Header.Set("X-Svc-Signature", "sha256="+hexMAC(secret, stamp+".", body))
	for _, o := range opts {
		o(&d)
	}
	return d
}

// WithHeader sets header to value (an empty value removes it): a tampered or partial delivery.
func WithHeader(header, value string) DeliveryOption {
	return func(d *Delivery) {
		if value == "" {
			d.Header.Del(header)
			return
		}
		d.Header.Set(header, value)
	}
}

func hexMAC(secret, prefix string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(prefix))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
