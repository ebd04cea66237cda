package telegram_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/telegram"
)

// FuzzRender: whatever the answer, Render sends messages within 4,096 UTF-16 units that join to
// it, bar blank chunks, and never cuts a character of valid text. Run it with
// go test -run '^$' -fuzz FuzzRender -fuzztime 20s ./runner/channels/telegram/
func FuzzRender(f *testing.F) {
	f.Add(strings.Repeat("word ", 1000))
	f.Add(strings.Repeat("a", 4095) + "😀tail")
	f.Add(strings.Repeat("a", 4090) + "👨\u200d👩\u200d👧🇳🇴" + strings.Repeat("\n", 10))
	f.Add(strings.Repeat("é\u0301", 3000))
	f.Add(strings.Repeat(" ", 5000) + "x")
	f.Add("\xff\xfe" + strings.Repeat("日本語", 2000))
	f.Fuzz(func(t *testing.T, text string) {
		reqs, err := telegram.Render(topic, []channels.Part{channels.TextPart(text)})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for i, r := range reqs {
			var m telegram.SendMessage
			if err := json.Unmarshal(r.Body, &m); err != nil {
				t.Fatal(err)
			}
			if n := channels.UTF16Len(m.Text); n > telegram.MaxText || strings.TrimSpace(m.Text) == "" {
				t.Fatalf("message %d: %d UTF-16 units, blank %v", i, n, strings.TrimSpace(m.Text) == "")
			}
			msgs = append(msgs, m.Text)
		}
		if !utf8.ValidString(text) {
			return // JSON turned invalid bytes into U+FFFD
		}
		// The messages are the text in order, with only whitespace between them left out.
		rest := text
		for i, m := range msgs {
			at := strings.Index(rest, m)
			if at < 0 || strings.TrimSpace(rest[:at]) != "" {
				t.Fatalf("message %d %q is not the next piece of the text", i, m)
			}
			rest = rest[at+len(m):]
		}
		if strings.TrimSpace(rest) != "" {
			t.Fatalf("the text's end %q was not sent", rest)
		}
	})
}

// FuzzParse: Parse never panics and answers an event or a PayloadError, seeded with the fixtures.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"message", "message_topic", "callback_query", "edited_message", "message_bot", "message_photo"} {
		f.Add(channelstest.Fixture(f, "telegram/"+name+".json"))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := telegram.Parser{BotUsername: "svc_agent_bot"}.Parse(body)
		if (ev == nil) == (err == nil) {
			t.Fatalf("Parse = %#v, %v: want exactly one", ev, err)
		}
	})
}
