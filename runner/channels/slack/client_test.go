package slack_test

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
)

func post(t *testing.T, key, text string) channels.Request {
	t.Helper()
	reqs, err := slack.Render(thread, []channels.Part{channels.TextPart(text)})
	if err != nil || len(reqs) != 1 {
		t.Fatalf("Render = %v, %v", reqs, err)
	}
	reqs[0].IdempotencyKey = key
	return reqs[0]
}

func TestClientSends(t *testing.T) {
	fake := channelstest.NewSlack(t)
	c := &slack.Client{BaseURL: fake.URL, Token: fake.Token}
	res, err := c.Send(t.Context(), post(t, "reply-1/0", "hello"))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if res.Status != http.StatusOK || res.MessageID == "" {
		t.Errorf("Send = %+v, want 200 and the message's ts", res)
	}
	calls := fake.Acknowledged(slack.MethodPostMessage)
	if len(calls) != 1 || calls[0].IdempotencyKey != "reply-1/0" || !strings.Contains(string(calls[0].Body), `"thread_ts":"1515449522.000016"`) {
		t.Errorf("fake saw %+v", calls)
	}
}

func TestClientErrors(t *testing.T) {
	tests := []struct {
		name       string
		fail       func(*channelstest.Slack)
		token      string
		retryable  bool
		retryAfter time.Duration
		status     int
		message    string
	}{
		{"HTTP 429 with Retry-After", func(f *channelstest.Slack) { f.FailNext(1, http.StatusTooManyRequests, 30*time.Second) }, "", true, 30 * time.Second, 429, "ratelimited"},
		{"ok false ratelimited", func(f *channelstest.Slack) { f.FailNextWith(1, "ratelimited") }, "", true, time.Second, 200, "ratelimited"},
		{"ok false channel_not_found", func(f *channelstest.Slack) { f.FailNextWith(1, "channel_not_found") }, "", false, 0, 200, "channel_not_found"},
		{"ok false internal_error", func(f *channelstest.Slack) { f.FailNextWith(1, "internal_error") }, "", true, 0, 200, "internal_error"},
		{"HTTP 500", func(f *channelstest.Slack) { f.FailNext(1, http.StatusInternalServerError, 0) }, "", true, 0, 500, "internal_server_error"},
		{"HTTP 400", func(f *channelstest.Slack) { f.FailNext(1, http.StatusBadRequest, 0) }, "", false, 0, 400, "bad_request"},
		{"wrong token", func(*channelstest.Slack) {}, "xoxb-wrong", false, 0, 200, "invalid_auth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := channelstest.NewSlack(t)
			tt.fail(fake)
			c := &slack.Client{BaseURL: fake.URL, Token: cmp.Or(tt.token, fake.Token)}
			_, err := c.Send(t.Context(), post(t, "k", "hello"))
			se, ok := errors.AsType[*channels.SendError](err)
			if !ok {
				t.Fatalf("Send = %v, want a *SendError", err)
			}
			if se.Retryable != tt.retryable || se.RetryAfter != tt.retryAfter || se.Status != tt.status || se.Message != tt.message {
				t.Errorf("Send = %+v, want retryable %v after %s, status %d, message %q", se, tt.retryable, tt.retryAfter, tt.status, tt.message)
			}
			if len(fake.Acknowledged("")) != 0 {
				t.Errorf("a failed call was acknowledged")
			}
		})
	}
}

// TestClientRetryAfterRateLimit: the outbox's loop over a 429 sends the reply once.
func TestClientRetryAfterRateLimit(t *testing.T) {
	fake := channelstest.NewSlack(t)
	fake.FailNext(2, http.StatusTooManyRequests, time.Second)
	c := &slack.Client{BaseURL: fake.URL, Token: fake.Token}
	req := post(t, "reply-7/0", "hello")
	var err error
	for range 3 {
		if _, err = c.Send(t.Context(), req); err == nil {
			break
		}
		if se, ok := errors.AsType[*channels.SendError](err); !ok || !se.Retryable || se.RetryAfter != time.Second {
			t.Fatalf("Send = %v, want a 429 retryable after 1s", err)
		}
	}
	if err != nil {
		t.Fatalf("third Send: %v", err)
	}
	if n := len(fake.Calls()); n != 3 {
		t.Errorf("fake saw %d calls, want 3", n)
	}
	if dups := fake.Duplicates(); len(dups) != 0 {
		t.Errorf("duplicates %v", dups)
	}
}

func TestClientReportsDuplicate(t *testing.T) {
	fake := channelstest.NewSlack(t)
	c := &slack.Client{BaseURL: fake.URL, Token: fake.Token}
	req := post(t, "reply-9/0", "hello")
	for range 2 {
		if _, err := c.Send(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if dups := fake.Duplicates(); len(dups) != 1 || dups[0] != "reply-9/0" {
		t.Errorf("Duplicates = %v, want [reply-9/0]", dups)
	}
}

func TestClientRefusesWithoutKey(t *testing.T) {
	c := &slack.Client{BaseURL: "http://127.0.0.1:1", Token: "x"}
	if _, err := c.Send(t.Context(), post(t, "", "hello")); !errors.Is(err, channels.ErrNoIdempotencyKey) {
		t.Errorf("Send without key = %v, want ErrNoIdempotencyKey", err)
	}
}

func TestClientNetworkError(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	over := errors.New("test over")
	cancel(over)
	c := &slack.Client{BaseURL: "http://127.0.0.1:1", Token: "x"}
	_, err := c.Send(ctx, post(t, "k", "hello"))
	if se, ok := errors.AsType[*channels.SendError](err); !ok || !se.Retryable || !errors.Is(err, over) {
		t.Errorf("Send with a cancelled ctx = %v, want a retryable SendError matching its cause", err)
	}
}

// TestRenderedPromptsAcceptedByFake: every request Render and RenderAck make passes the fake's
// checks of Slack's limits.
func TestRenderedPromptsAcceptedByFake(t *testing.T) {
	fake := channelstest.NewSlack(t)
	c := &slack.Client{BaseURL: fake.URL, Token: fake.Token}
	reqs, err := slack.Render(thread, []channels.Part{
		channels.TextPart(strings.Repeat("long answer ", 3000)),
		channels.ApprovalPart("apr_1", strings.Repeat("Approve? ", 400)),
		channels.ChoicePart("ask_1", "Which?", []channels.Option{{Value: "a", Label: strings.Repeat("L", 200)}, {Value: "b"}}, true),
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &channels.Action{Channel: channels.Slack, Callback: channels.Callback{Kind: channels.ActionApproval, ID: "apr_1"}, User: channels.User{ID: "U1"}, Reply: thread, Ack: channels.Ack{MessageID: "1.2"}}
	for _, outcome := range []channels.AckOutcome{channels.AckAnswered, channels.AckAlreadyAnswered, channels.AckExpired} {
		acks, err := slack.RenderAck(a, outcome)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, acks...)
	}
	for i, r := range reqs {
		r.IdempotencyKey = "k" + string(rune('a'+i))
		if _, err := c.Send(t.Context(), r); err != nil {
			t.Errorf("request %d (%s): %v", i, r.Method, err)
		}
	}
}
