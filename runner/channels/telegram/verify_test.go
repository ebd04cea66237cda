package telegram_test

import (
	"errors"
	"testing"
	"time"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/telegram"
)

const secret = "s3cr3t_Token-for-the-webhook"

func TestVerify(t *testing.T) {
	body := channelstest.Fixture(t, "telegram/message.json")
	now := time.Now()
	tests := []struct {
		name     string
		delivery channelstest.Delivery
		secret   string
		reason   string // "" when accepted
	}{
		{"right secret", channelstest.TelegramDelivery(secret, body), secret, ""},
		{"wrong secret", channelstest.TelegramDelivery("not-the-secret", body), secret, channels.ReasonWrongSecret},
		{"secret's prefix", channelstest.TelegramDelivery(secret[:10], body), secret, channels.ReasonWrongSecret},
		{"secret and more", channelstest.TelegramDelivery(secret+"x", body), secret, channels.ReasonWrongSecret},
		{"no header", channelstest.TelegramDelivery(secret, body, channelstest.WithHeader(telegram.SecretHeader, "")), secret, channels.ReasonMissing},
		{"no secret configured", channelstest.TelegramDelivery("", body), "", channels.ReasonNoSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := telegram.Verify(tt.delivery.Header, tt.delivery.Body, tt.secret, now)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			ve, ok := errors.AsType[*channels.VerifyError](err)
			if !ok || !errors.Is(err, channels.ErrUnauthorized) || ve.Header != telegram.SecretHeader || ve.Reason != tt.reason {
				t.Errorf("Verify = %v, want ErrUnauthorized on %s: %s", err, telegram.SecretHeader, tt.reason)
			}
		})
	}
}
