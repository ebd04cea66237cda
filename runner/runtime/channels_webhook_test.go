package runtime_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/webhook"
	"svc/runner/models"
	"svc/runner/runtime"
)

// The signed generic webhook end to end: a signed delivery is answered 200 and its copy as a
// duplicate; the turn's answer is POSTed to the replyUrl once, signed with the webhook's secret,
// in reply to the delivery; a delivery signed with another secret is 401.
func TestChannelWebhookEndToEnd(t *testing.T) {
	const secret = "wh-shared-secret"
	receiver := channelstest.NewWebhookReceiver(t, secret)
	ag := loadAgent(t, "hello")
	ag.Config.Channels = &agent.ChannelsConfig{Webhook: &agent.WebhookChannel{Secret: "env:WH_SECRET", ReplyURL: "env:WH_REPLY_URL"}}
	vars := map[string]string{"WH_SECRET": secret, "WH_REPLY_URL": receiver.URL}
	q := &chanQueue{tasks: make(chan runtime.ChannelTask, 100)}
	e := &chanEnv{q: q, store: registry.NewChannels(dbtest.SQLite(t))}
	e.env = start(t, runtime.Options{Agent: ag, AgentID: agentID,
		DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"},
		Env:          func(name string) (string, bool) { v, ok := vars[name]; return v, ok },
		Channels:     &runtime.Channels{Store: e.store, Turn: q.turn, Send: q.send},
	})
	body := []byte(`{"id": "msg-1", "conversation": "ticket-42", "user": "u-7", "text": "where is my parcel?"}`)
	if r := e.deliver(channelstest.WebhookDelivery("not-the-secret", body, time.Now()), "/channels/webhook/webhook"); r.Status != http.StatusUnauthorized {
		t.Fatalf("delivery signed with another secret: %d %v, want 401", r.Status, r.JSON)
	}
	for i, dup := range []bool{false, true} {
		r := e.deliver(channelstest.WebhookDelivery(secret, body, time.Now()), "/channels/webhook/webhook")
		if r.Status != http.StatusOK || (r.JSON["duplicate"] == true) != dup {
			t.Fatalf("delivery %d: %d %v, want 200 (duplicate %v)", i, r.Status, r.JSON, dup)
		}
	}
	e.drain()
	replies := receiver.Acknowledged("reply")
	if len(replies) != 1 || len(receiver.Calls()) != 1 || len(receiver.Duplicates()) != 0 {
		t.Fatalf("replies %d of %d calls, duplicates %v; want one signed reply", len(replies), len(receiver.Calls()), receiver.Duplicates())
	}
	var reply webhook.ReplyBody
	if err := json.Unmarshal(replies[0].Body, &reply); err != nil {
		t.Fatal(err)
	}
	if reply.InReplyTo != "msg-1" || reply.Conversation != "ticket-42" || reply.Text != "echo: where is my parcel?" || replies[0].IdempotencyKey == "" {
		t.Errorf("reply %+v (key %q), want the echo in reply to msg-1 of ticket-42, with an idempotency key", reply, replies[0].IdempotencyKey)
	}
}
