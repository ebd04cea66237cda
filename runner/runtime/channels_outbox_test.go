package runtime_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
)

// A send task whose entry another sender holds (a late original task beside the sweep's) sends
// nothing; once the entry is free again it is sent, once, whichever task comes.
func TestChannelSendClaimed(t *testing.T) {
	e := startChannels(t, nil)
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, mention(t, 1), time.Now()), "/channels/slack/webhook"); r.Status != http.StatusOK {
		t.Fatalf("delivery: %d %v", r.Status, r.JSON)
	}
	ctx := context.Background()
	if err := e.rt.RunChannel(ctx, e.next()); err != nil { // the turn
		t.Fatal(err)
	}
	send := e.next()
	if send.Send == nil || len(send.Send.Outbox) != 1 {
		t.Fatalf("task %+v, want the reply's sending", send)
	}
	id := send.Send.Outbox[0]
	if ok, err := e.store.ClaimOutbox(ctx, id, time.Now().Add(time.Hour)); err != nil || !ok {
		t.Fatalf("ClaimOutbox = %v, %v", ok, err)
	}
	if err := e.rt.RunChannel(ctx, send); err != nil {
		t.Fatal(err)
	}
	if n := len(e.slack.Calls()); n != 0 {
		t.Fatalf("%d calls while another sender holds the entry, want none", n)
	}
	if err := e.store.Postpone(ctx, id, time.Now(), "the other sender gave up"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.rt.RunChannel(ctx, send); err != nil {
			t.Fatal(err)
		}
	}
	if posts := e.slack.Acknowledged(slack.MethodPostMessage); len(posts) != 1 || len(e.slack.Duplicates()) != 0 {
		t.Errorf("%d posts, duplicates %v; want one", len(posts), e.slack.Duplicates())
	}
}
