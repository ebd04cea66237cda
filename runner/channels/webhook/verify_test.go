package webhook_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"svc/automations"
	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/webhook"
)

const secret = "whsec_0123456789abcdef"

func TestVerify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	body := channelstest.Fixture(t, "webhook/message.json")
	tests := []struct {
		name     string
		delivery channelstest.Delivery
		secret   string
		header   string // "" when accepted
		reason   string
	}{
		{"signed", channelstest.WebhookDelivery(secret, body, now), secret, "", ""},
		{"signed 5 minutes ahead", channelstest.WebhookDelivery(secret, body, now.Add(5*time.Minute)), secret, "", ""},
		{"other secret", channelstest.WebhookDelivery("whsec_other", body, now), secret, webhook.SignatureHeader, channels.ReasonBadSignature},
		{"stale", channelstest.WebhookDelivery(secret, body, now.Add(-5*time.Minute-time.Second)), secret, webhook.TimestampHeader, channels.ReasonStale},
		{"no signature", channelstest.WebhookDelivery(secret, body, now, channelstest.WithHeader(webhook.SignatureHeader, "")), secret, webhook.SignatureHeader, channels.ReasonMissing},
		{"no timestamp", channelstest.WebhookDelivery(secret, body, now, channelstest.WithHeader(webhook.TimestampHeader, "")), secret, webhook.TimestampHeader, channels.ReasonMissing},
		{"timestamp in milliseconds", channelstest.WebhookDelivery(secret, body, now, channelstest.WithHeader(webhook.TimestampHeader, "1700000000000")), secret, webhook.TimestampHeader, channels.ReasonStale},
		{"timestamp not a number", channelstest.WebhookDelivery(secret, body, now, channelstest.WithHeader(webhook.TimestampHeader, "now")), secret, webhook.TimestampHeader, channels.ReasonMalformed},
		{"bare hex", channelstest.WebhookDelivery(secret, body, now, channelstest.WithHeader(webhook.SignatureHeader, strings.Repeat("0", 64))), secret, webhook.SignatureHeader, channels.ReasonMalformed},
		{"no secret configured", channelstest.WebhookDelivery("", body, now), "", webhook.SignatureHeader, channels.ReasonNoSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.Verify(tt.delivery.Header, tt.delivery.Body, tt.secret, now)
			if tt.header == "" {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			ve, ok := errors.AsType[*channels.VerifyError](err)
			if !ok || !errors.Is(err, channels.ErrUnauthorized) || ve.Header != tt.header || !strings.HasPrefix(ve.Reason, tt.reason) {
				t.Errorf("Verify = %v, want ErrUnauthorized on %s: %s", err, tt.header, tt.reason)
			}
		})
	}
}

// TestSameSchemeAsEventTrigger: the channel's signature is the event trigger's of CONTRACT §9,
// both ways.
func TestSameSchemeAsEventTrigger(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_1","text":"hi"}`)
	if got, want := webhook.Sign(secret, now.Unix(), body), automations.Sign(secret, now.Unix(), body); got != want {
		t.Errorf("Sign = %s, automations.Sign = %s", got, want)
	}
	d := channelstest.WebhookDelivery(secret, body, now)
	if err := automations.VerifyEvent(secret, d.Header.Get(webhook.SignatureHeader), d.Header.Get(webhook.TimestampHeader), body, now); err != nil {
		t.Errorf("automations.VerifyEvent of a channel delivery: %v", err)
	}
	h := d.Header.Clone()
	h.Set(webhook.SignatureHeader, automations.Sign(secret, now.Unix(), body))
	h.Set(webhook.TimestampHeader, strconv.FormatInt(now.Unix(), 10))
	if err := webhook.Verify(h, body, secret, now); err != nil {
		t.Errorf("Verify of an event trigger's signature: %v", err)
	}
}
