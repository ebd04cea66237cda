package channelstest

import (
	"crypto/hmac"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// WebhookReceiver is a fake replyUrl of the signed generic webhook: it checks each reply's
// X-Svc-Signature against Secret (401 when wrong or older than 5 minutes), records it as method
// "reply", and answers 200 {"ok":true} or the failures planned with FailNext (429 with a
// Retry-After header).
type WebhookReceiver struct {
	Recorder
	// URL is the replyUrl.
	URL string
	// Secret is the webhook's secret.
	Secret string
}

// NewWebhookReceiver starts a fake replyUrl on 127.0.0.1 for secret, closed when t ends.
func NewWebhookReceiver(t testing.TB, secret string) *WebhookReceiver {
	t.Helper()
	wr := &WebhookReceiver{Secret: secret}
	srv := httptest.NewServer(http.HandlerFunc(wr.serve))
	t.Cleanup(srv.Close)
	wr.URL = srv.URL + "/replies"
	return wr
}

func (wr *WebhookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body) // a short read fails the signature below
	status := http.StatusOK
	if f, ok := wr.nextFailure(); ok {
		status = f.status
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(int(f.retryAfter/time.Second)))
		}
	} else if !wr.signed(r, body) {
		status = http.StatusUnauthorized
	}
	wr.record(r, "reply", body, status, status == http.StatusOK)
	writeJSON(w, status, map[string]any{"ok": status == http.StatusOK})
}

// signed reports whether the request carries a fresh, valid X-Svc-Signature.
func (wr *WebhookReceiver) signed(r *http.Request, body []byte) bool {
	stamp := r.Header.Get("X-Svc-Timestamp")
	ts, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Minute {
		return false
	}
	want := "sha256=" + hexMAC(wr.Secret, stamp+".", body)
	return hmac.Equal([]byte(r.Header.Get("X-Svc-Signature")), []byte(want))
}
