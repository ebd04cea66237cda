package automations

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The headers of an event trigger's delivery (CONTRACT §9).
const (
	SignatureHeader = "X-Svc-Signature"
	TimestampHeader = "X-Svc-Timestamp"
	EventIDHeader   = "X-Svc-Event-Id"
	// MaxEventSkew is how far X-Svc-Timestamp may be from now, either way.
	MaxEventSkew = 5 * time.Minute
)

// The errors of VerifyEvent; each is 401 to the sender.
var (
	ErrBadSignature   = errors.New("automations: event signature does not match")
	ErrStaleTimestamp = errors.New("automations: event timestamp outside 5 minutes of now")
	ErrMalformed      = errors.New("automations: malformed event signature headers")
)

// MalformedError names the header that cannot be read. It matches ErrMalformed.
type MalformedError struct {
	Header string
	Reason string
}

// Error implements error.
func (e *MalformedError) Error() string {
	return fmt.Sprintf("automations: malformed %s header: %s", e.Header, e.Reason)
}

// Unwrap returns ErrMalformed.
func (e *MalformedError) Unwrap() error { return ErrMalformed }

// NewSecret is a fresh event-trigger secret: 32 random bytes, hex (64 characters), prefixed
// "whsec_" so it is recognizable in logs and secret scanners.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return "whsec_" + hex.EncodeToString(b), nil
}

// Sign is the X-Svc-Signature value of body sent at timestamp (unix seconds):
// "sha256=" + hex HMAC-SHA256 with secret of "<timestamp>.<body>".
func Sign(secret string, timestamp int64, body []byte) string {
	return "sha256=" + hex.EncodeToString(eventMAC(secret, timestamp, body))
}

func eventMAC(secret string, timestamp int64, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// VerifyEvent checks a delivery's headers against the raw body, before anything is parsed: a
// *MalformedError (ErrMalformed) for a header that cannot be read, ErrStaleTimestamp for a
// timestamp more than 5 minutes from now, ErrBadSignature when the HMAC does not match
// (compared in constant time). The timestamp is checked before the signature, but both
// answers are 401 and neither tells the sender the secret.
func VerifyEvent(secret, headerSig, headerTimestamp string, body []byte, now time.Time) error {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(headerSig), "sha256=")
	if !ok {
		return &MalformedError{Header: SignatureHeader, Reason: `want "sha256=<hex>"`}
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return &MalformedError{Header: SignatureHeader, Reason: "want 64 hex digits after sha256="}
	}
	ts, err := strconv.ParseInt(strings.TrimSpace(headerTimestamp), 10, 64)
	if err != nil {
		return &MalformedError{Header: TimestampHeader, Reason: "want unix seconds"}
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > MaxEventSkew || skew < -MaxEventSkew {
		return ErrStaleTimestamp
	}
	if !hmac.Equal(got, eventMAC(secret, ts, body)) {
		return ErrBadSignature
	}
	return nil
}
