package webhook

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"svc/automations"
	"svc/runner/channels"
)

// The headers of a signed delivery and of a signed reply (an automation's event trigger's).
const (
	SignatureHeader = automations.SignatureHeader
	TimestampHeader = automations.TimestampHeader
	EventIDHeader   = automations.EventIDHeader
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
	for _, name := range []string{TimestampHeader, SignatureHeader} {
		if strings.TrimSpace(h.Get(name)) == "" {
			return channels.Unauthorized(name, channels.ReasonMissing)
		}
	}
	// The scheme is the automations' event trigger's: one implementation checks both.
	err := automations.VerifyEvent(secret, h.Get(SignatureHeader), h.Get(TimestampHeader), body, now)
	var malformed *automations.MalformedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &malformed):
		return channels.Unauthorized(malformed.Header, channels.ReasonMalformed+": "+malformed.Reason)
	case errors.Is(err, automations.ErrStaleTimestamp):
		return channels.Unauthorized(TimestampHeader, channels.ReasonStale)
	}
	return channels.Unauthorized(SignatureHeader, channels.ReasonBadSignature)
}

// Sign is the X-Svc-Signature of body sent at timestamp (unix seconds).
func Sign(secret string, timestamp int64, body []byte) string {
	return automations.Sign(secret, timestamp, body)
}
