package slack_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
)

func TestParseFixtures(t *testing.T) {
	mentionReply := channels.Reply{Channel: channels.Slack, SlackChannel: "C0LAN2Q65", ThreadTS: "1515449522.000016", SlackUser: "U061F7AUR"}
	tests := []struct {
		fixture string
		want    channels.Event
	}{
		{"url_verification", channels.Challenge{Value: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}},
		{"app_mention", &channels.Message{
			Channel: channels.Slack, DeliveryID: "Ev0LAN670R",
			ConversationKey: "slack:T061EG9R6:C0LAN2Q65:1515449522.000016", ScopeID: "slack:T061EG9R6:C0LAN2Q65",
			User: channels.User{ID: "U061F7AUR"}, Text: "is it everything a river should be?", Addressed: true,
			Reply: mentionReply,
		}},
		{"message_thread", &channels.Message{
			Channel: channels.Slack, DeliveryID: "Ev0LAN9X2Q",
			ConversationKey: "slack:T061EG9R6:C0LAN2Q65:1515449522.000016", ScopeID: "slack:T061EG9R6:C0LAN2Q65",
			User: channels.User{ID: "U061F7AUR"}, Text: "and what about the delta?", Addressed: false,
			Reply: mentionReply,
		}},
		{"message_im", &channels.Message{
			Channel: channels.Slack, DeliveryID: "Ev0PV52K25",
			ConversationKey: "slack:T061EG9R6:D0PNCRP9N:1515450000.000300", ScopeID: "slack:T061EG9R6:D0PNCRP9N",
			User: channels.User{ID: "U061F7AUR"}, Text: "Hello there", Addressed: true,
			Reply: channels.Reply{Channel: channels.Slack, SlackChannel: "D0PNCRP9N", ThreadTS: "1515450000.000300", SlackUser: "U061F7AUR"},
		}},
		{"message_bot", channels.Ignored{Reason: "message subtype bot_message"}},
		{"message_changed", channels.Ignored{Reason: "message subtype message_changed"}},
		{"block_actions", &channels.Action{
			Channel: channels.Slack, DeliveryID: "action:12466734323.1395872398.8f0f3a9e2b0d4c7a",
			ConversationKey: "slack:T061EG9R6:C0LAN2Q65:1515449522.000016", ScopeID: "slack:T061EG9R6:C0LAN2Q65",
			Callback: channels.Callback{Kind: channels.ActionApproval, ID: "apr_k3j5n7p9q2r4s6t8", Approved: true},
			Label:    "Approve", User: channels.User{ID: "U061F7AUR", Name: "amy.mcgee"},
			Reply: mentionReply,
			Ack:   channels.Ack{MessageID: "1515449530.000100", PromptText: "Refund 40 EUR to order 1042?"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			body := channelstest.Fixture(t, "slack/"+tt.fixture+".json")
			if tt.fixture == "block_actions" {
				body = []byte(url.Values{"payload": {string(body)}}.Encode())
			}
			got, err := slack.Parse(body)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseIgnores: what is not a person writing to the agent is Ignored, never an error.
func TestParseIgnores(t *testing.T) {
	mention := string(channelstest.Fixture(t, "slack/app_mention.json"))
	thread := string(channelstest.Fixture(t, "slack/message_thread.json"))
	tests := []struct {
		name   string
		body   string
		parser slack.Parser
		reason string
	}{
		{"bot_id without subtype", strings.Replace(thread, `"user": "U061F7AUR",`, `"user": "U061F7AUR", "bot_id": "B0X",`, 1), slack.Parser{}, "a bot's message"},
		{"own message", strings.Replace(thread, `"user": "U061F7AUR",`, `"user": "U0LAN0Z89",`, 1), slack.Parser{}, "the agent's own message"},
		{"own message, bot user configured", strings.Replace(strings.Replace(thread, `"user": "U061F7AUR",`, `"user": "U0SELF",`, 1), `"authorizations"`, `"x"`, 1), slack.Parser{BotUserID: "U0SELF"}, "the agent's own message"},
		{"channel join", strings.Replace(thread, `"type": "message",`, `"type": "message", "subtype": "channel_join",`, 1), slack.Parser{}, "message subtype channel_join"},
		{"message deleted", strings.Replace(thread, `"type": "message",`, `"type": "message", "subtype": "message_deleted",`, 1), slack.Parser{}, "message subtype message_deleted"},
		{"reaction", strings.Replace(thread, `"type": "message",`, `"type": "reaction_added",`, 1), slack.Parser{}, `event type "reaction_added"`},
		{"message that mentions the agent", strings.Replace(thread, `"text": "and what`, `"text": "<@U0LAN0Z89> and what`, 1), slack.Parser{}, "a mention of the agent: its app_mention event starts the turn"},
		{"bare mention", strings.Replace(mention, `"<@U0LAN0Z89> is it everything a river should be?"`, `"<@U0LAN0Z89>  "`, 1), slack.Parser{}, "a message without text"},
		{"app_rate_limited", `{"token":"x","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}`, slack.Parser{}, `envelope type "app_rate_limited"`},
		{"view submission", "payload=" + url.QueryEscape(`{"type":"view_submission"}`), slack.Parser{}, `interactive type "view_submission"`},
		{"another app's button", "payload=" + url.QueryEscape(`{"type":"block_actions","user":{"id":"U1"},"actions":[{"value":"hello"}]}`), slack.Parser{}, "not an svc button: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parser.Parse([]byte(tt.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			ig, ok := got.(channels.Ignored)
			if !ok || !strings.HasPrefix(ig.Reason, tt.reason) {
				t.Errorf("Parse = %#v, want Ignored %q", got, tt.reason)
			}
		})
	}
}

func TestParseThreadBroadcast(t *testing.T) {
	body := strings.Replace(string(channelstest.Fixture(t, "slack/message_thread.json")), `"type": "message",`, `"type": "message", "subtype": "thread_broadcast",`, 1)
	got, err := slack.Parse([]byte(body))
	if m, ok := got.(*channels.Message); err != nil || !ok || m.ConversationKey != "slack:T061EG9R6:C0LAN2Q65:1515449522.000016" {
		t.Errorf("Parse = %#v, %v; want the thread's message", got, err)
	}
}

func TestParseErrors(t *testing.T) {
	thread := string(channelstest.Fixture(t, "slack/message_thread.json"))
	tests := []struct {
		name  string
		body  string
		field string
	}{
		{"not JSON", "<html>", "body"},
		{"challenge empty", `{"type":"url_verification"}`, "challenge"},
		{"no event_id", strings.Replace(thread, `"event_id": "Ev0LAN9X2Q",`, ``, 1), "event_id"},
		{"no event", `{"type":"event_callback","event_id":"Ev1"}`, "event"},
		{"no channel", strings.Replace(thread, `"channel": "C0LAN2Q65",`, ``, 1), "event.channel"},
		{"no team", strings.Replace(strings.Replace(thread, `"team_id": "T061EG9R6",`, ``, 1), `"team": "T061EG9R6",`, ``, 1), "team_id"},
		{"empty payload", "payload=", "payload"},
		{"payload not JSON", "payload=%7Bnope", "payload"},
		{"action without channel", "payload=" + url.QueryEscape(`{"type":"block_actions","user":{"id":"U1","team_id":"T1"},"container":{"message_ts":"1.2"},"actions":[{"value":"a:apr_1:y"}]}`), "container.channel_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := slack.Parse([]byte(tt.body))
			pe, ok := errors.AsType[*channels.PayloadError](err)
			if !ok || pe.Field != tt.field || pe.Channel != channels.Slack {
				t.Errorf("Parse = %#v, %v; want a PayloadError on %s", got, err, tt.field)
			}
		})
	}
}

// BenchmarkVerifyParse is the route's work on a Slack mention before it answers 200:
// go test -run '^$' -bench VerifyParse -benchmem ./runner/channels/slack/
func BenchmarkVerifyParse(b *testing.B) {
	body := channelstest.Fixture(b, "slack/app_mention.json")
	now := time.Now()
	d := channelstest.SlackDelivery(secret, body, now)
	b.ReportAllocs()
	for b.Loop() {
		if err := slack.Verify(d.Header, d.Body, secret, now); err != nil {
			b.Fatal(err)
		}
		if _, err := slack.Parse(d.Body); err != nil {
			b.Fatal(err)
		}
	}
}
