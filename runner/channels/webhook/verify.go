package webhook

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

// The headers of a signed delivery and of a signed reply (the event trigger's of CONTRACT §9).
const (
	SignatureHeader = "X-Svc-Signature"
	TimestampHeader = "X-Svc-Timestamp"
	EventIDHeader   = "X-Svc-Event-Id"
)

// Verify checks that body was signed with secret: X-Svc-Signature must be "sha256=" + hex
// HMAC-SHA256(secret, "<X-Svc-Timestamp>.<body>"), compared in constant time, and X-Svc-Timestamp
// (unix seconds) within 5 minutes of now. Every failure is a *channels.VerifyError
// (ErrUnauthorized) naming the header: missing, malformed, stale, bad signature; an empty secret
// accepts nothing.
func Verify(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return channels.Unauthorized(SignatureHeader, channels.ReasonNoSecret)
	}
	rawTS := strings.TrimSpace(h.Get(TimestampHeader))
	if rawTS == "" {
		return channels.Unauthorized(TimestampHeader, channels.ReasonMissing)
	}
	ts, err := strconv.ParseInt(rawTS, 10, 64)
	if err != nil {
		return channels.Unauthorized(TimestampHeader, channels.ReasonMalformed+": want unix seconds")
	}
	sig := strings.TrimSpace(h.Get(SignatureHeader))
	if sig == "" {
		return channels.Unauthorized(SignatureHeader, channels.ReasonMissing)
	}
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(got) != sha256.Size {
		return channels.Unauthorized(SignatureHeader, channels.ReasonMalformed+`: want "sha256=" and 64 hex digits`)
	}
	if err := channels.CheckSkew(TimestampHeader, time.Unix(ts, 0), now); err != nil {
		return err
	}
	if !hmac.Equal(got, mac(secret, ts, body)) {
		return channels.Unauthorized(SignatureHeader, channels.ReasonBadSignature)
	}
	return nil
}

// Sign is the X-Svc-Signature of body sent at timestamp (unix seconds).
func Sign(secret string, timestamp int64, body []byte) string {
	return "sha256=" + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return m.Sum(nil)
}
