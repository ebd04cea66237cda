package telegram_test

import (
	"cmp"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/telegram"
)

func send(t *testing.T, key, text string) channels.Request {
	t.Helper()
	reqs, err := telegram.Render(topic, []channels.Part{channels.TextPart(text)})
	if err != nil || len(reqs) != 1 {
		t.Fatalf("Render = %v, %v", reqs, err)
	}
	reqs[0].IdempotencyKey = key
	return reqs[0]
}

func TestClientSends(t *testing.T) {
	fake := channelstest.NewTelegram(t)
	c := &telegram.Client{BaseURL: fake.URL, Token: fake.Token}
	res, err := c.Send(t.Context(), send(t, "reply-1/0", "hello"))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if res.Status != http.StatusOK || res.MessageID != "1" {
		t.Errorf("Send = %+v, want 200 and message_id 1", res)
	}
	calls := fake.Acknowledged(telegram.MethodSendMessage)
	if len(calls) != 1 || calls[0].IdempotencyKey != "reply-1/0" || !strings.Contains(string(calls[0].Body), `"message_thread_id":42`) {
		t.Errorf("fake saw %+v", calls)
	}
}

func TestClientErrors(t *testing.T) {
	tests := []struct {
		name       string
		fail       func(*channelstest.Telegram)
		token      string
		retryable  bool
		retryAfter time.Duration
		status     int
		message    string
	}{
		{"429 with retry_after", func(f *channelstest.Telegram) { f.FailNext(1, http.StatusTooManyRequests, 17*time.Second) }, "", true, 17 * time.Second, 429, "Too Many Requests: retry after 17"},
		{"500", func(f *channelstest.Telegram) { f.FailNext(1, http.StatusInternalServerError, 0) }, "", true, 0, 500, "Internal Server Error"},
		{"502", func(f *channelstest.Telegram) { f.FailNext(1, http.StatusBadGateway, 0) }, "", true, 0, 502, "Bad Gateway"},
		{"400", func(f *channelstest.Telegram) { f.FailNext(1, http.StatusBadRequest, 0) }, "", false, 0, 400, "Bad Request: chat not found"},
		{"403", func(f *channelstest.Telegram) { f.FailNext(1, http.StatusForbidden, 0) }, "", false, 0, 403, "Forbidden"},
		{"wrong token", func(*channelstest.Telegram) {}, "999:wrong", false, 0, 401, "Unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := channelstest.NewTelegram(t)
			tt.fail(fake)
			c := &telegram.Client{BaseURL: fake.URL, Token: cmp.Or(tt.token, fake.Token)}
			_, err := c.Send(t.Context(), send(t, "k", "hello"))
			se, ok := errors.AsType[*channels.SendError](err)
			if !ok {
				t.Fatalf("Send = %v, want a *SendError", err)
			}
			if se.Retryable != tt.retryable || se.RetryAfter != tt.retryAfter || se.Status != tt.status || se.Message != tt.message {
				t.Errorf("Send = %+v, want retryable %v after %s, status %d, message %q", se, tt.retryable, tt.retryAfter, tt.status, tt.message)
			}
			if strings.Contains(err.Error(), c.Token) {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
}

func TestClientNetworkErrorHidesToken(t *testing.T) {
	c := &telegram.Client{BaseURL: "http://127.0.0.1:1", Token: "123:SECRET-TOKEN"}
	_, err := c.Send(t.Context(), send(t, "k", "hello"))
	se, ok := errors.AsType[*channels.SendError](err)
	if !ok || !se.Retryable || se.Status != 0 {
		t.Fatalf("Send to a closed port = %v, want a retryable SendError", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error %q shows the token", err)
	}
}

// TestRenderedAcceptedByFake: what Render and RenderAck make passes the fake's checks of
// Telegram's limits (text length, callback_data), and the outbox's retries after a 429 send each
// message once.
func TestRenderedAcceptedByFake(t *testing.T) {
	fake := channelstest.NewTelegram(t)
	c := &telegram.Client{BaseURL: fake.URL, Token: fake.Token}
	reqs, err := telegram.Render(topic, []channels.Part{
		channels.TextPart(strings.Repeat("😀 long answer ", 700)),
		channels.ApprovalPart("apr_1", "Approve?"),
		channels.ChoicePart("ask_"+strings.Repeat("x", 55), "Which?", []channels.Option{{Value: "a"}, {Value: "b", Label: "Bee"}}, true),
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &channels.Action{Channel: channels.Telegram, Callback: channels.Callback{Kind: channels.ActionApproval, ID: "apr_1"}, User: channels.User{ID: "1"},
		Reply: topic, Ack: channels.Ack{CallbackID: "cb1", MessageID: "7", PromptText: "Approve?"}}
	for _, outcome := range []channels.AckOutcome{channels.AckAnswered, channels.AckAlreadyAnswered, channels.AckExpired} {
		acks, err := telegram.RenderAck(a, outcome)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, acks...)
	}
	fake.FailNext(1, http.StatusTooManyRequests, time.Second)
	for i, r := range reqs {
		r.IdempotencyKey = "reply-3/" + string(rune('a'+i))
		for attempt := 0; ; attempt++ {
			_, err := c.Send(t.Context(), r)
			if err == nil {
				break
			}
			se, ok := errors.AsType[*channels.SendError](err)
			if !ok || !se.Retryable || attempt > 1 {
				t.Fatalf("request %d (%s): %v", i, r.Method, err)
			}
		}
	}
	if got := len(fake.Acknowledged("")); got != len(reqs) {
		t.Errorf("fake acknowledged %d calls, want %d", got, len(reqs))
	}
	if dups := fake.Duplicates(); len(dups) != 0 {
		t.Errorf("duplicates %v", dups)
	}
}
