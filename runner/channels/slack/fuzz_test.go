package slack_test

import (
	"net/url"
	"testing"
	"time"

	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
)

// FuzzVerifyParse: Parse never panics and answers an event or a PayloadError, and Verify accepts
// any body signed with the secret, seeded with every fixture. Run it with
// go test -run '^$' -fuzz FuzzVerifyParse -fuzztime 20s ./runner/channels/slack/
func FuzzVerifyParse(f *testing.F) {
	for _, name := range []string{"url_verification", "app_mention", "message_thread", "message_im", "message_bot", "message_changed"} {
		f.Add(channelstest.Fixture(f, "slack/"+name+".json"))
	}
	f.Add([]byte(url.Values{"payload": {string(channelstest.Fixture(f, "slack/block_actions.json"))}}.Encode()))
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, body []byte) {
		d := channelstest.SlackDelivery(secret, body, now)
		if err := slack.Verify(d.Header, body, secret, now); err != nil {
			t.Fatalf("Verify of a signed body: %v", err)
		}
		ev, err := slack.Parse(body)
		if (ev == nil) == (err == nil) {
			t.Fatalf("Parse = %#v, %v: want exactly one", ev, err)
		}
	})
}
