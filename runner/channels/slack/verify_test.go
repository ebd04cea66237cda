package slack_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

func TestVerify(t *testing.T) {
	now := time.Unix(1_531_420_618, 0)
	body := channelstest.Fixture(t, "slack/app_mention.json")
	tests := []struct {
		name     string
		delivery channelstest.Delivery
		secret   string
		header   string // "" when the delivery is accepted
		reason   string
	}{
		{"signed", channelstest.SlackDelivery(secret, body, now), secret, "", ""},
		{"signed 4 minutes ago", channelstest.SlackDelivery(secret, body, now.Add(-4*time.Minute)), secret, "", ""},
		{"retry", channelstest.SlackDelivery(secret, body, now, channelstest.WithRetryNum(1)), secret, "", ""},
		{"interactive", channelstest.SlackInteractiveDelivery(secret, channelstest.Fixture(t, "slack/block_actions.json"), now), secret, "", ""},
		{"other secret", channelstest.SlackDelivery("another secret", body, now), secret, slack.SignatureHeader, channels.ReasonBadSignature},
		{"stale", channelstest.SlackDelivery(secret, body, now.Add(-6*time.Minute)), secret, slack.TimestampHeader, channels.ReasonStale},
		{"from the future", channelstest.SlackDelivery(secret, body, now.Add(6*time.Minute)), secret, slack.TimestampHeader, channels.ReasonStale},
		{"no signature", channelstest.SlackDelivery(secret, body, now, channelstest.WithHeader(slack.SignatureHeader, "")), secret, slack.SignatureHeader, channels.ReasonMissing},
		{"no timestamp", channelstest.SlackDelivery(secret, body, now, channelstest.WithHeader(slack.TimestampHeader, "")), secret, slack.TimestampHeader, channels.ReasonMissing},
		{"timestamp not a number", channelstest.SlackDelivery(secret, body, now, channelstest.WithHeader(slack.TimestampHeader, "yesterday")), secret, slack.TimestampHeader, channels.ReasonMalformed},
		{"signature without v0", channelstest.SlackDelivery(secret, body, now, channelstest.WithHeader(slack.SignatureHeader, strings.Repeat("a", 64))), secret, slack.SignatureHeader, channels.ReasonMalformed},
		{"signature short", channelstest.SlackDelivery(secret, body, now, channelstest.WithHeader(slack.SignatureHeader, "v0=abcd")), secret, slack.SignatureHeader, channels.ReasonMalformed},
		{"timestamp replaced", channelstest.SlackDelivery(secret, body, now, channelstest.WithHeader(slack.TimestampHeader, "1531420619")), secret, slack.SignatureHeader, channels.ReasonBadSignature},
		{"no secret configured", channelstest.SlackDelivery("", body, now), "", slack.SignatureHeader, channels.ReasonNoSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := slack.Verify(tt.delivery.Header, tt.delivery.Body, tt.secret, now)
			if tt.header == "" {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, channels.ErrUnauthorized) {
				t.Fatalf("Verify = %v, want ErrUnauthorized", err)
			}
			ve, _ := errors.AsType[*channels.VerifyError](err)
			if ve.Header != tt.header || !strings.HasPrefix(ve.Reason, tt.reason) {
				t.Errorf("Verify = %q, want header %s and reason %q", err, tt.header, tt.reason)
			}
		})
	}
	t.Run("tampered body", func(t *testing.T) {
		d := channelstest.SlackDelivery(secret, body, now)
		tampered := append([]byte(nil), d.Body...)
		tampered[len(tampered)-2] = ' '
		if err := slack.Verify(d.Header, tampered, secret, now); !errors.Is(err, channels.ErrUnauthorized) {
			t.Errorf("Verify of a tampered body = %v, want ErrUnauthorized", err)
		}
	})
}

// TestSignMatchesSlackDocs checks Sign against the example of Slack's "Verifying requests from
// Slack" guide.
func TestSignMatchesSlackDocs(t *testing.T) {
	body := "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	const want = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	if got := slack.Sign(secret, 1531420618, []byte(body)); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}
