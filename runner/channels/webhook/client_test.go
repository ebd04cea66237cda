package webhook_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/webhook"
)

var reply = channels.Reply{Channel: channels.Webhook, Conversation: "order-1042", InReplyTo: "evt_01HZX3K9Q2"}

func TestRenderAndSend(t *testing.T) {
	recv := channelstest.NewWebhookReceiver(t, secret)
	c := &webhook.Client{URL: recv.URL, Secret: secret}
	parts := []channels.Part{
		channels.TextPart(strings.Repeat("long ", 20000)),
		channels.TextPart(" "),
		channels.ApprovalPart("apr_1", "Refund?"),
	}
	reqs, err := webhook.Render(reply, parts)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("Render = %d requests, %v; want one", len(reqs), err)
	}
	reqs[0].IdempotencyKey = "reply-1/0"
	if _, err := c.Send(t.Context(), reqs[0]); err != nil {
		t.Fatalf("Send: %v", err)
	}
	calls := recv.Acknowledged(webhook.MethodReply)
	if len(calls) != 1 || calls[0].IdempotencyKey != "reply-1/0" {
		t.Fatalf("receiver acknowledged %+v", calls)
	}
	var got webhook.ReplyBody
	if err := json.Unmarshal(calls[0].Body, &got); err != nil {
		t.Fatal(err)
	}
	want := webhook.ReplyBody{InReplyTo: "evt_01HZX3K9Q2", Conversation: "order-1042", Text: parts[0].Text, Parts: []channels.Part{parts[0], parts[2]}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reply body (-want +got):\n%s", diff)
	}
}

func TestRenderAck(t *testing.T) {
	a := &channels.Action{Channel: channels.Webhook, Callback: channels.Callback{Kind: channels.ActionApproval, ID: "apr_1"}, Reply: reply}
	reqs, err := webhook.RenderAck(a, channels.AckAlreadyAnswered)
	want := `{"in_reply_to":"evt_01HZX3K9Q2","conversation":"order-1042","ack":{"id":"apr_1","outcome":"already_answered"}}`
	if err != nil || len(reqs) != 1 || string(reqs[0].Body) != want {
		t.Errorf("RenderAck = %+v, %v; want %s", reqs, err, want)
	}
	if reqs, err := webhook.Render(reply, nil); err != nil || len(reqs) != 0 {
		t.Errorf("Render of nothing = %+v, %v", reqs, err)
	}
	if _, err := webhook.Render(channels.Reply{Channel: channels.Slack}, nil); !errors.Is(err, webhook.ErrReplyTarget) {
		t.Errorf("Render to Slack = %v, want ErrReplyTarget", err)
	}
}

func TestClientErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter time.Duration
		secret     string
		retryable  bool
		wantStatus int
	}{
		{"429", http.StatusTooManyRequests, 9 * time.Second, secret, true, 429},
		{"500", http.StatusInternalServerError, 0, secret, true, 500},
		{"400", http.StatusBadRequest, 0, secret, false, 400},
		{"signed with another secret", 0, 0, "whsec_other", false, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recv := channelstest.NewWebhookReceiver(t, secret)
			if tt.status != 0 {
				recv.FailNext(1, tt.status, tt.retryAfter)
			}
			c := &webhook.Client{URL: recv.URL, Secret: tt.secret}
			reqs, _ := webhook.Render(reply, []channels.Part{channels.TextPart("hi")})
			reqs[0].IdempotencyKey = "k"
			_, err := c.Send(t.Context(), reqs[0])
			se, ok := errors.AsType[*channels.SendError](err)
			if !ok || se.Retryable != tt.retryable || se.RetryAfter != tt.retryAfter || se.Status != tt.wantStatus {
				t.Errorf("Send = %v, want status %d retryable %v after %s", err, tt.wantStatus, tt.retryable, tt.retryAfter)
			}
		})
	}
	c := &webhook.Client{URL: "http://127.0.0.1:1", Secret: secret}
	if _, err := c.Send(t.Context(), channels.Request{Method: webhook.MethodReply, Body: []byte(`{}`)}); !errors.Is(err, channels.ErrNoIdempotencyKey) {
		t.Errorf("Send without key = %v, want ErrNoIdempotencyKey", err)
	}
}
