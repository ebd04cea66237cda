package telegram_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/telegram"
)

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		fixture string
		parser  telegram.Parser
		want    channels.Event
	}{
		{"message", telegram.Parser{}, &channels.Message{
			Channel: channels.Telegram, DeliveryID: "update:10000",
			ConversationKey: "telegram:1111111:0", ScopeID: "telegram:1111111",
			User: channels.User{ID: "1111111", Name: "@Test"}, Text: "What is the weather in Oslo?", Addressed: true,
			Reply: channels.Reply{Channel: channels.Telegram, ChatID: 1111111, ReplyToID: 1365},
		}},
		{"message_topic", telegram.Parser{BotUsername: "svc_agent_bot"}, &channels.Message{
			Channel: channels.Telegram, DeliveryID: "update:10001",
			ConversationKey: "telegram:-1001234567890:42", ScopeID: "telegram:-1001234567890",
			User: channels.User{ID: "2222222", Name: "@kari_n"}, Text: "how many refunds are open?", Addressed: true,
			Reply: channels.Reply{Channel: channels.Telegram, ChatID: -1001234567890, ThreadID: 42, ReplyToID: 2210},
		}},
		{"callback_query", telegram.Parser{}, &channels.Action{
			Channel: channels.Telegram, DeliveryID: "update:10003",
			ConversationKey: "telegram:1111111:0", ScopeID: "telegram:1111111",
			Callback: channels.Callback{Kind: channels.ActionChoice, ID: "ask_m4n5b6v7c8x9z0l1", Option: 1},
			Label:    "Pro", User: channels.User{ID: "1111111", Name: "@Test"},
			Reply: channels.Reply{Channel: channels.Telegram, ChatID: 1111111},
			Ack:   channels.Ack{CallbackID: "4382bfdwdsb323b2d9", MessageID: "1367", PromptText: "Which plan?"},
		}},
		{"edited_message", telegram.Parser{}, channels.Ignored{Reason: "an edited message"}},
		{"message_bot", telegram.Parser{}, channels.Ignored{Reason: "a bot's message"}},
		{"message_photo", telegram.Parser{}, channels.Ignored{Reason: "a message without text"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			got, err := tt.parser.Parse(channelstest.Fixture(t, "telegram/"+tt.fixture+".json"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAddressed(t *testing.T) {
	topic := string(channelstest.Fixture(t, "telegram/message_topic.json"))
	tests := []struct {
		name   string
		body   string
		parser telegram.Parser
		want   bool
		text   string
	}{
		{"mention of the bot", topic, telegram.Parser{BotUsername: "svc_agent_bot"}, true, "how many refunds are open?"},
		{"mention of someone else", strings.Replace(topic, "@svc_agent_bot", "@somebody_els", 1), telegram.Parser{BotUsername: "svc_agent_bot"}, false, "@somebody_els how many refunds are open?"},
		{"any mention, bot unknown", topic, telegram.Parser{}, true, "@svc_agent_bot how many refunds are open?"},
		{"no entity in a group", strings.Replace(topic, `"type": "mention"`, `"type": "hashtag"`, 1), telegram.Parser{BotUsername: "svc_agent_bot"}, false, "how many refunds are open?"},
		{"command", strings.Replace(strings.Replace(topic, `"type": "mention"`, `"type": "bot_command"`, 1), "@svc_agent_bot how", "/refunds how", 1), telegram.Parser{BotUsername: "svc_agent_bot"}, true, "/refunds how many refunds are open?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parser.Parse([]byte(tt.body))
			m, ok := got.(*channels.Message)
			if err != nil || !ok {
				t.Fatalf("Parse = %#v, %v", got, err)
			}
			if m.Addressed != tt.want || m.Text != tt.text {
				t.Errorf("Parse: addressed %v, text %q; want %v, %q", m.Addressed, m.Text, tt.want, tt.text)
			}
		})
	}
}

func TestParseIgnoresAndErrors(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		reason string // Ignored's reason, or "" for a PayloadError
		field  string
	}{
		{"channel post", `{"update_id":1,"channel_post":{"message_id":1,"chat":{"id":-100,"type":"channel"},"text":"news"}}`, "a channel post", ""},
		{"member update", `{"update_id":1,"my_chat_member":{}}`, "an update without message or callback_query", ""},
		{"another keyboard", `{"update_id":1,"callback_query":{"id":"1","from":{"id":1},"message":{"message_id":1,"chat":{"id":1}},"data":"page:2"}}`, "not an svc button", ""},
		{"inline message callback", `{"update_id":1,"callback_query":{"id":"1","from":{"id":1},"inline_message_id":"x","data":"a:apr_1:y"}}`, "a callback without its message", ""},
		{"not JSON", `nope`, "", "body"},
		{"no update_id", `{"message":{}}`, "", "update_id"},
		{"no chat", `{"update_id":1,"message":{"message_id":1,"from":{"id":1},"text":"hi"}}`, "", "message.chat"},
		{"callback without id", `{"update_id":1,"callback_query":{"from":{"id":1},"data":"a:apr_1:y"}}`, "", "callback_query.id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := telegram.Parse([]byte(tt.body))
			if tt.reason != "" {
				if ig, ok := got.(channels.Ignored); err != nil || !ok || !strings.HasPrefix(ig.Reason, tt.reason) {
					t.Errorf("Parse = %#v, %v; want Ignored %q", got, err, tt.reason)
				}
				return
			}
			if pe, ok := errors.AsType[*channels.PayloadError](err); !ok || pe.Field != tt.field {
				t.Errorf("Parse = %#v, %v; want a PayloadError on %s", got, err, tt.field)
			}
		})
	}
}
