package webhook_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/webhook"
)

func TestParse(t *testing.T) {
	reply := channels.Reply{Channel: channels.Webhook, Conversation: "order-1042"}
	tests := []struct {
		name string
		body []byte
		want channels.Event
	}{
		{"message fixture", channelstest.Fixture(t, "webhook/message.json"), &channels.Message{
			Channel: channels.Webhook, DeliveryID: "evt_01HZX3K9Q2", ConversationKey: "webhook:order-1042",
			User: channels.User{ID: "crm:alice"}, Text: "Customer asks where order 1042 is.", Addressed: true,
			Reply: channels.Reply{Channel: channels.Webhook, Conversation: reply.Conversation, InReplyTo: "evt_01HZX3K9Q2"},
		}},
		{"action fixture", channelstest.Fixture(t, "webhook/action.json"), &channels.Action{
			Channel: channels.Webhook, DeliveryID: "evt_01HZX3M7R4", ConversationKey: "webhook:order-1042",
			Callback: channels.Callback{Kind: channels.ActionApproval, ID: "apr_k3j5n7p9q2r4s6t8", Approved: true},
			User:     channels.User{ID: "crm:alice"},
			Reply:    channels.Reply{Channel: channels.Webhook, Conversation: reply.Conversation, InReplyTo: "evt_01HZX3M7R4"},
		}},
		{"choice without conversation", []byte(`{"id":"e2","action":{"type":"choice","id":"ask_1","option":2}}`), &channels.Action{
			Channel: channels.Webhook, DeliveryID: "e2", ConversationKey: "webhook:e2",
			Callback: channels.Callback{Kind: channels.ActionChoice, ID: "ask_1", Option: 2},
			Reply:    channels.Reply{Channel: channels.Webhook, InReplyTo: "e2"},
		}},
		{"no text", []byte(`{"id":"e3","text":"  "}`), channels.Ignored{Reason: "a delivery without text or action"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := webhook.Parse(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		body  string
		field string
	}{
		{`[1]`, "body"},
		{`{"text":"hi"}`, "id"},
		{`{"id":"e","action":{"type":"vote","id":"x"}}`, "action.type"},
		{`{"id":"e","action":{"type":"choice","id":"ask_1"}}`, "action.option"},
		{`{"id":"e","action":{"type":"approval","id":"bad id"}}`, "action"},
		{`{"id":"e","action":{"type":"choice","id":"ask_1","option":99}}`, "action"},
	}
	for _, tt := range tests {
		got, err := webhook.Parse([]byte(tt.body))
		if pe, ok := errors.AsType[*channels.PayloadError](err); !ok || pe.Field != tt.field {
			t.Errorf("Parse(%s) = %#v, %v; want a PayloadError on %s", tt.body, got, err, tt.field)
		}
	}
}
