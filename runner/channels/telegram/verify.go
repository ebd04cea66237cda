package telegram

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"time"

	"svc/runner/channels"
)

// SecretHeader carries the secret_token given to setWebhook in every update Telegram sends.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// Verify checks that an update comes from Telegram: its X-Telegram-Bot-Api-Secret-Token must equal
// secret, compared in constant time (also in length: both sides are hashed first). Telegram signs
// nothing and sends no timestamp, so body and now are not used; they keep the signature of every
// platform's Verify the same. Every failure is a *channels.VerifyError (ErrUnauthorized): missing
// header, wrong secret; an empty secret accepts nothing.
func Verify(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return channels.Unauthorized(SecretHeader, channels.ReasonNoSecret)
	}
	got := h.Get(SecretHeader)
	if got == "" {
		return channels.Unauthorized(SecretHeader, channels.ReasonMissing)
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(secret))
	if !hmac.Equal(a[:], b[:]) {
		return channels.Unauthorized(SecretHeader, channels.ReasonWrongSecret)
	}
	return nil
}
