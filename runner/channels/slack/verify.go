package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"svc/runner/channels"
)

// The headers Slack signs its requests with, and the one its retries carry.
const (
	SignatureHeader = "X-Slack-Signature"
	TimestampHeader = "X-Slack-Request-Timestamp"
	RetryNumHeader  = "X-Slack-Retry-Num"
)

// Verify checks that body was sent by Slack to the app whose signing secret is secret, before
// anything is parsed: X-Slack-Signature must be "v0=" + hex HMAC-SHA256(secret,
// "v0:<X-Slack-Request-Timestamp>:<body>"), compared in constant time, and the timestamp within 5
// minutes of now. Every failure is a *channels.VerifyError (ErrUnauthorized) naming the header:
// missing, malformed, stale, bad signature; an empty secret accepts nothing.
func Verify(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return channels.Unauthorized(SignatureHeader, channels.ReasonNoSecret)
	}
	rawTS := h.Get(TimestampHeader)
	if rawTS == "" {
		return channels.Unauthorized(TimestampHeader, channels.ReasonMissing)
	}
	ts, err := strconv.ParseInt(strings.TrimSpace(rawTS), 10, 64)
	if err != nil {
		return channels.Unauthorized(TimestampHeader, channels.ReasonMalformed+": want unix seconds")
	}
	sig := h.Get(SignatureHeader)
	if sig == "" {
		return channels.Unauthorized(SignatureHeader, channels.ReasonMissing)
	}
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(sig), "v0=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(got) != sha256.Size {
		return channels.Unauthorized(SignatureHeader, channels.ReasonMalformed+`: want "v0=" and 64 hex digits`)
	}
	if err := channels.CheckSkew(TimestampHeader, time.Unix(ts, 0), now); err != nil {
		return err
	}
	if !hmac.Equal(got, mac(secret, strings.TrimSpace(rawTS), body)) {
		return channels.Unauthorized(SignatureHeader, channels.ReasonBadSignature)
	}
	return nil
}

// Sign is the X-Slack-Signature Slack sends with body at timestamp (unix seconds).
func Sign(secret string, timestamp int64, body []byte) string {
	return "v0=" + hex.EncodeToString(mac(secret, strconv.FormatInt(timestamp, 10), body))
}

func mac(secret, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + timestamp + ":"))
	m.Write(body)
	return m.Sum(nil)
}
