package slack_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/channels"
	"svc/runner/channels/slack"
)

var thread = channels.Reply{Channel: channels.Slack, SlackChannel: "C0LAN2Q65", ThreadTS: "1515449522.000016", SlackUser: "U061F7AUR"}

func TestRenderText(t *testing.T) {
	reqs, err := slack.Render(thread, []channels.Part{channels.TextPart("Yes: rivers <flow> & so on.")})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"channel":"C0LAN2Q65","thread_ts":"1515449522.000016","text":"Yes: rivers &lt;flow&gt; &amp; so on."}`
	if len(reqs) != 1 || reqs[0].Method != slack.MethodPostMessage || string(reqs[0].Body) != want {
		t.Errorf("Render = %+v, want one chat.postMessage %s", reqs, want)
	}
}

func TestRenderSplitsLongText(t *testing.T) {
	para := strings.Repeat("word ", 199) + "end.\n\n" // 1,001 characters
	text := strings.Repeat(para, 9)                   // 9,009 characters
	reqs, err := slack.Render(thread, []channels.Part{channels.TextPart(text)})
	if err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	for i, r := range reqs {
		var m slack.PostMessage
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		if n := channels.UTF16Len(m.Text); n > slack.MaxText {
			t.Errorf("message %d: %d characters, more than %d", i, n, slack.MaxText)
		}
		if m.ThreadTS != thread.ThreadTS {
			t.Errorf("message %d: thread_ts %q, want %q", i, m.ThreadTS, thread.ThreadTS)
		}
		joined.WriteString(m.Text)
	}
	if len(reqs) != 3 || joined.String() != text {
		t.Errorf("Render: %d messages joining to %d characters, want 3 joining to the text", len(reqs), joined.Len())
	}
}

func TestRenderEscapesWithinLimit(t *testing.T) {
	text := strings.Repeat("<>&", 3000) // 9,000 characters, 36,000 once escaped
	reqs, err := slack.Render(thread, []channels.Part{channels.TextPart(text)})
	if err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	for i, r := range reqs {
		var m slack.PostMessage
		_ = json.Unmarshal(r.Body, &m)
		if n := channels.UTF16Len(m.Text); n > slack.MaxText {
			t.Errorf("message %d: %d characters escaped, more than %d", i, n, slack.MaxText)
		}
		joined.WriteString(m.Text)
	}
	if want := strings.Repeat("&lt;&gt;&amp;", 3000); joined.String() != want {
		t.Errorf("escaped messages do not join to the escaped text")
	}
}

func TestRenderPrompts(t *testing.T) {
	parts := []channels.Part{
		channels.TextPart("I need your approval first."),
		channels.ApprovalPart("apr_k3j5n7p9q2r4s6t8", "Refund 40 EUR to order 1042?"),
		channels.ChoicePart("ask_m4n5b6v7c8x9z0l1", "Which plan?", []channels.Option{{Value: "free", Label: "Free"}, {Value: "pro", Label: strings.Repeat("P", 80)}}, false),
	}
	reqs, err := slack.Render(thread, parts)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 {
		t.Fatalf("Render = %d requests, want 3", len(reqs))
	}
	wantApproval := `{"channel":"C0LAN2Q65","thread_ts":"1515449522.000016","text":"Refund 40 EUR to order 1042?","blocks":[` +
		`{"type":"section","block_id":"svc:apr_k3j5n7p9q2r4s6t8","text":{"type":"mrkdwn","text":"Refund 40 EUR to order 1042?"}},` +
		`{"type":"actions","block_id":"svc:apr_k3j5n7p9q2r4s6t8:buttons","elements":[` +
		`{"type":"button","action_id":"svc_approve","text":{"type":"plain_text","text":"Approve","emoji":true},"value":"a:apr_k3j5n7p9q2r4s6t8:y","style":"primary"},` +
		`{"type":"button","action_id":"svc_deny","text":{"type":"plain_text","text":"Deny","emoji":true},"value":"a:apr_k3j5n7p9q2r4s6t8:n","style":"danger"}]}]}`
	if diff := cmp.Diff(wantApproval, string(reqs[1].Body)); diff != "" {
		t.Errorf("approval (-want +got):\n%s", diff)
	}
	var choice struct {
		Blocks []struct {
			Elements []struct {
				ActionID string `json:"action_id"`
				Text     struct {
					Text string `json:"text"`
				} `json:"text"`
				Value string `json:"value"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(reqs[2].Body, &choice); err != nil {
		t.Fatal(err)
	}
	buttons := choice.Blocks[1].Elements
	if len(buttons) != 2 || buttons[0].Value != "q:ask_m4n5b6v7c8x9z0l1:0" || buttons[1].Value != "q:ask_m4n5b6v7c8x9z0l1:1" || buttons[1].ActionID != "svc_choice_1" {
		t.Errorf("choice buttons = %+v", buttons)
	}
	if n := channels.UTF16Len(buttons[1].Text.Text); n > slack.MaxButtonText || !strings.HasSuffix(buttons[1].Text.Text, "…") {
		t.Errorf("long label = %q (%d), want it cut to %d with an ellipsis", buttons[1].Text.Text, n, slack.MaxButtonText)
	}
}

func TestRenderLongPrompt(t *testing.T) {
	question := strings.Repeat("Why? ", 1000) // 5,000 characters
	reqs, err := slack.Render(thread, []channels.Part{channels.ChoicePart("ask_1", question, []channels.Option{{Value: "a"}}, true)})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 {
		t.Fatalf("Render = %d requests, want the question's head then the section with buttons", len(reqs))
	}
	var last struct {
		Blocks []struct {
			Text *struct{ Text string } `json:"text"`
		} `json:"blocks"`
	}
	_ = json.Unmarshal(reqs[1].Body, &last)
	if n := channels.UTF16Len(last.Blocks[0].Text.Text); n > slack.MaxSectionText || !strings.Contains(last.Blocks[0].Text.Text, "Several answers?") {
		t.Errorf("section: %d characters ending %q", n, last.Blocks[0].Text.Text[max(0, len(last.Blocks[0].Text.Text)-40):])
	}
}

func TestRenderRefuses(t *testing.T) {
	if _, err := slack.Render(channels.Reply{Channel: channels.Telegram, ChatID: 1}, []channels.Part{channels.TextPart("x")}); err == nil {
		t.Error("Render to a Telegram chat: no error")
	}
	if _, err := slack.Render(thread, []channels.Part{channels.ApprovalPart("bad id", "x")}); err == nil {
		t.Error("Render of an approval whose id the callback data cannot carry: no error")
	}
	if reqs, err := slack.Render(thread, []channels.Part{channels.TextPart(" \n ")}); err != nil || len(reqs) != 0 {
		t.Errorf("Render of blank text = %+v, %v; want nothing", reqs, err)
	}
}

func TestRenderAck(t *testing.T) {
	a := &channels.Action{
		Channel: channels.Slack, Callback: channels.Callback{Kind: channels.ActionChoice, ID: "ask_1", Option: 1}, Label: "Pro <beta>",
		User: channels.User{ID: "U061F7AUR"}, Reply: thread, Ack: channels.Ack{MessageID: "1515449530.000100", PromptText: "Which plan?"},
	}
	tests := []struct {
		outcome channels.AckOutcome
		methods []string
		want    string // in the first body
	}{
		{channels.AckAnswered, []string{slack.MethodUpdate}, `"text":"Which plan?\n☑️ <@U061F7AUR> chose Pro &lt;beta&gt;"`},
		{channels.AckAlreadyAnswered, []string{slack.MethodPostEphemeral}, `"user":"U061F7AUR","thread_ts":"1515449522.000016","text":"This was already answered."`},
		{channels.AckExpired, []string{slack.MethodUpdate, slack.MethodPostEphemeral}, `"ts":"1515449530.000100"`},
	}
	for _, tt := range tests {
		t.Run(string(tt.outcome), func(t *testing.T) {
			reqs, err := slack.RenderAck(a, tt.outcome)
			if err != nil {
				t.Fatal(err)
			}
			var methods []string
			for _, r := range reqs {
				methods = append(methods, r.Method)
			}
			if diff := cmp.Diff(tt.methods, methods); diff != "" {
				t.Errorf("methods (-want +got):\n%s", diff)
			}
			if !strings.Contains(string(reqs[0].Body), tt.want) {
				t.Errorf("body %s does not contain %s", reqs[0].Body, tt.want)
			}
		})
	}
}
