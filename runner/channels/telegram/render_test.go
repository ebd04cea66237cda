package telegram_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"svc/runner/channels"
	"svc/runner/channels/telegram"
)

var topic = channels.Reply{Channel: channels.Telegram, ChatID: -1001234567890, ThreadID: 42, ReplyToID: 2210}

// sent decodes the sendMessage bodies of reqs.
func sent(t *testing.T, reqs []channels.Request) []telegram.SendMessage {
	t.Helper()
	out := make([]telegram.SendMessage, len(reqs))
	for i, r := range reqs {
		if r.Method != telegram.MethodSendMessage {
			t.Fatalf("request %d is %s, want sendMessage", i, r.Method)
		}
		if err := json.Unmarshal(r.Body, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestRenderFiveThousandCharacters(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 5000; i++ {
		b.WriteString("The river runs to the sea, and the sea does not fill. ")
		if i%6 == 5 {
			b.WriteString("\n\n")
		}
	}
	text := b.String()[:5000]
	reqs, err := telegram.Render(topic, []channels.Part{channels.TextPart(text)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := sent(t, reqs)
	if len(msgs) != 2 {
		t.Fatalf("Render of 5,000 characters = %d messages, want 2", len(msgs))
	}
	var joined strings.Builder
	for i, m := range msgs {
		if n := channels.UTF16Len(m.Text); n > telegram.MaxText {
			t.Errorf("message %d: %d UTF-16 units, more than %d", i, n, telegram.MaxText)
		}
		if m.ChatID != topic.ChatID || m.MessageThreadID != 42 {
			t.Errorf("message %d goes to chat %d topic %d", i, m.ChatID, m.MessageThreadID)
		}
		joined.WriteString(m.Text)
	}
	if joined.String() != text {
		t.Error("the messages do not join to the answer")
	}
	if !strings.HasSuffix(msgs[0].Text, "\n\n") {
		t.Errorf("first message ends %q, want a paragraph break", msgs[0].Text[len(msgs[0].Text)-20:])
	}
	if msgs[0].ReplyParameters == nil || msgs[0].ReplyParameters.MessageID != 2210 || msgs[1].ReplyParameters != nil {
		t.Errorf("reply_parameters: %+v then %+v, want the first message only to reply to 2210", msgs[0].ReplyParameters, msgs[1].ReplyParameters)
	}
}

// TestRenderEmojiAtTheBoundary: emoji straddling 4,096 UTF-16 units move whole to the next message.
func TestRenderEmojiAtTheBoundary(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{"surrogate pair across the limit", strings.Repeat("a", 4095) + "😀" + "tail"},
		{"skin tone across the limit", strings.Repeat("a", 4093) + "👍🏽" + "tail"},
		{"zwj family across the limit", strings.Repeat("a", 4090) + "👨\u200d👩\u200d👧" + "tail"},
		{"only emoji", strings.Repeat("😀", 3000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs, err := telegram.Render(topic, []channels.Part{channels.TextPart(tt.text)})
			if err != nil {
				t.Fatal(err)
			}
			var joined strings.Builder
			for i, m := range sent(t, reqs) {
				if n := channels.UTF16Len(m.Text); n > telegram.MaxText {
					t.Errorf("message %d: %d UTF-16 units", i, n)
				}
				if !utf8.ValidString(m.Text) {
					t.Errorf("message %d cuts a character", i)
				}
				if r, _ := utf8.DecodeRuneInString(m.Text); r == '\u200d' || r == 0x1f3fd {
					t.Errorf("message %d starts inside an emoji sequence", i)
				}
				joined.WriteString(m.Text)
			}
			if joined.String() != tt.text {
				t.Error("the messages do not join to the answer")
			}
		})
	}
}

func TestRenderPrompts(t *testing.T) {
	longID := "ask_" + strings.Repeat("x", 55) // the longest id the callback data carries
	reqs, err := telegram.Render(channels.Reply{Channel: channels.Telegram, ChatID: 1111111}, []channels.Part{
		channels.ApprovalPart("apr_k3j5n7p9q2r4s6t8", "Refund 40 EUR to order 1042?"),
		channels.ChoicePart(longID, "Which plan?", []channels.Option{{Value: "free", Label: "Free"}, {Value: strings.Repeat("v", 200)}}, false),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantApproval := `{"chat_id":1111111,"text":"Refund 40 EUR to order 1042?","reply_markup":{"inline_keyboard":[[` +
		`{"text":"✅ Approve","callback_data":"a:apr_k3j5n7p9q2r4s6t8:y"},{"text":"❌ Deny","callback_data":"a:apr_k3j5n7p9q2r4s6t8:n"}]]}}`
	if diff := cmp.Diff(wantApproval, string(reqs[0].Body)); diff != "" {
		t.Errorf("approval (-want +got):\n%s", diff)
	}
	var choice struct {
		ReplyMarkup struct {
			InlineKeyboard [][]struct {
				Text         string `json:"text"`
				CallbackData string `json:"callback_data"`
			} `json:"inline_keyboard"`
		} `json:"reply_markup"`
	}
	if err := json.Unmarshal(reqs[1].Body, &choice); err != nil {
		t.Fatal(err)
	}
	rows := choice.ReplyMarkup.InlineKeyboard
	if len(rows) != 2 || rows[1][0].Text != strings.Repeat("v", 200) {
		t.Fatalf("keyboard = %+v, want one option per row, labelled by value when unlabelled", rows)
	}
	for _, row := range rows {
		for _, b := range row {
			if len(b.CallbackData) > channels.MaxCallbackData {
				t.Errorf("callback_data %q is %d bytes, more than %d", b.CallbackData, len(b.CallbackData), channels.MaxCallbackData)
			}
			if c, err := channels.DecodeCallback(b.CallbackData); err != nil || c.ID != longID {
				t.Errorf("callback_data %q decodes to %+v, %v", b.CallbackData, c, err)
			}
		}
	}
	if _, err := telegram.Render(topic, []channels.Part{channels.ApprovalPart(longID+"yy", "x")}); err == nil {
		t.Error("Render of an id too long for callback_data: no error")
	}
}

func TestRenderRefuses(t *testing.T) {
	if _, err := telegram.Render(channels.Reply{Channel: channels.Slack, SlackChannel: "C1"}, []channels.Part{channels.TextPart("x")}); err == nil {
		t.Error("Render to a Slack channel: no error")
	}
	if reqs, err := telegram.Render(topic, []channels.Part{channels.TextPart("\n\n  ")}); err != nil || len(reqs) != 0 {
		t.Errorf("Render of blank text = %+v, %v; want nothing", reqs, err)
	}
}

func TestRenderAck(t *testing.T) {
	a := &channels.Action{
		Channel: channels.Telegram, Callback: channels.Callback{Kind: channels.ActionApproval, ID: "apr_1", Approved: true},
		User: channels.User{ID: "1111111", Name: "@Test"}, Reply: channels.Reply{Channel: channels.Telegram, ChatID: 1111111},
		Ack: channels.Ack{CallbackID: "4382bfdwdsb323b2d9", MessageID: "1367", PromptText: "Refund 40 EUR?"},
	}
	tests := []struct {
		outcome channels.AckOutcome
		want    []string
	}{
		{channels.AckAnswered, []string{
			`{"callback_query_id":"4382bfdwdsb323b2d9","text":"Thanks, answered."}`,
			`{"chat_id":1111111,"message_id":1367,"text":"Refund 40 EUR?\n\n✅ Approved by @Test"}`,
		}},
		{channels.AckAlreadyAnswered, []string{`{"callback_query_id":"4382bfdwdsb323b2d9","text":"This was already answered."}`}},
		{channels.AckExpired, []string{
			`{"callback_query_id":"4382bfdwdsb323b2d9","text":"This is no longer waiting for an answer."}`,
			`{"chat_id":1111111,"message_id":1367,"reply_markup":{"inline_keyboard":[]}}`,
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.outcome), func(t *testing.T) {
			reqs, err := telegram.RenderAck(a, tt.outcome)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range reqs {
				got = append(got, string(r.Body))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RenderAck (-want +got):\n%s", diff)
			}
		})
	}
}
