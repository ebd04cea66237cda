package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
	"svc/runner/runtime"
)

// mention is the app_mention fixture as delivery n: its own event id and thread.
func mention(t *testing.T, n int) []byte {
	t.Helper()
	b := strings.ReplaceAll(string(channelstest.Fixture(t, "slack/app_mention.json")), "Ev0LAN670R", fmt.Sprintf("EvC%d", n))
	return []byte(strings.ReplaceAll(b, "1515449522.000016", fmt.Sprintf("1515449522.%06d", n)))
}

// Deliveries that come at once are recorded together: each new one gets its turn, and a copy
// delivered at the same time as its original is a duplicate without a second turn.
func TestChannelConcurrentDeliveries(t *testing.T) {
	e := startChannels(t, nil)
	const n = 20
	now := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	dups := map[string]int{}
	for i := range 2 * n {
		wg.Go(func() {
			r := e.deliver(channelstest.SlackDelivery(slackSecret, mention(t, i%n), now), "/channels/slack/webhook")
			if r.Status != http.StatusOK {
				t.Errorf("delivery %d: %d %v", i, r.Status, r.JSON)
			}
			mu.Lock()
			defer mu.Unlock()
			if r.JSON["duplicate"] == true {
				dups[fmt.Sprint(i%n)]++
			}
		})
	}
	wg.Wait()
	turns := map[string]int{}
	for len(e.q.tasks) > 0 {
		task := e.next()
		if task.Message == nil {
			t.Fatalf("task %+v, want turns only", task)
		}
		turns[task.Message.DeliveryID]++
	}
	if len(turns) != n || len(dups) != n {
		t.Errorf("turns %v, duplicates %v; want one turn and one duplicate for each of %d deliveries", turns, dups, n)
	}
	for id, c := range turns {
		if c != 1 {
			t.Errorf("delivery %s has %d turns", id, c)
		}
	}
}

// A delivery whose turn cannot be enqueued is 503 and forgotten: the platform's retry is taken.
func TestChannelTurnNotQueued(t *testing.T) {
	e := startChannels(t, nil)
	d := func() channelstest.Delivery {
		return channelstest.SlackDelivery(slackSecret, mention(t, 1), time.Now())
	}
	e.q.failTurns.Store(true)
	if r := e.deliver(d(), "/channels/slack/webhook"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("delivery with the queue down: %d %v, want 503", r.Status, r.JSON)
	}
	e.q.failTurns.Store(false)
	if r := e.deliver(d(), "/channels/slack/webhook"); r.Status != http.StatusOK || r.JSON["duplicate"] == true {
		t.Fatalf("the platform's retry: %d %v, want 200, not a duplicate", r.Status, r.JSON)
	}
	if task := e.next(); task.Message == nil || task.Message.DeliveryID != "EvC1" {
		t.Errorf("task %+v, want the retry's turn", task)
	}
}

// A delivery signed with a signing secret changed since the channel's secrets were read is
// verified against the new one at once; the old one is refused from then on.
func TestChannelSecretChanged(t *testing.T) {
	vars := map[string]string{"SLACK_SIGNING_SECRET": slackSecret, "SLACK_BOT_TOKEN": "xoxb-1"}
	e := startChannels(t, vars)
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, mention(t, 1), time.Now()), "/channels/slack/webhook"); r.Status != http.StatusOK {
		t.Fatalf("delivery: %d %v", r.Status, r.JSON)
	}
	vars["SLACK_SIGNING_SECRET"] = "rotated"
	if r := e.deliver(channelstest.SlackDelivery("rotated", mention(t, 2), time.Now()), "/channels/slack/webhook"); r.Status != http.StatusOK {
		t.Fatalf("delivery signed with the new secret: %d %v", r.Status, r.JSON)
	}
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, mention(t, 3), time.Now()), "/channels/slack/webhook"); r.Status != http.StatusUnauthorized {
		t.Fatalf("delivery signed with the old secret: %d %v, want 401", r.Status, r.JSON)
	}
}

// A host's Record that enqueues the turns itself (the embedded queue, in the same commit) is
// not followed by Turn; when its commit fails nothing is recorded, the answer is 503, and the
// platform's retry is taken.
func TestChannelRecordWithTheTurns(t *testing.T) {
	e := startChannels(t, nil)
	var fail atomic.Bool
	fail.Store(true)
	var queued atomic.Int32
	e.host.Record = func(ctx context.Context, ds []runtime.Delivery) ([]runtime.Recorded, error) {
		if fail.Load() {
			return nil, errors.New("the database is down")
		}
		dup, err := e.store.SeeDeliveries(ctx, runtime.DeliveryKeys(ds), nil)
		if err != nil {
			return nil, err
		}
		res := make([]runtime.Recorded, len(ds))
		for i, d := range dup {
			res[i] = runtime.RecordedDuplicate
			if !d {
				res[i] = runtime.RecordedQueued
				queued.Add(1)
			}
		}
		return res, nil
	}
	d := func() channelstest.Delivery {
		return channelstest.SlackDelivery(slackSecret, mention(t, 1), time.Now())
	}
	if r := e.deliver(d(), "/channels/slack/webhook"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("delivery while the commit fails: %d %v, want 503", r.Status, r.JSON)
	}
	fail.Store(false)
	for i, dup := range []bool{false, true} {
		if r := e.deliver(d(), "/channels/slack/webhook"); r.Status != http.StatusOK || (r.JSON["duplicate"] == true) != dup {
			t.Fatalf("delivery %d: %d %v, want 200 (duplicate %v)", i, r.Status, r.JSON, dup)
		}
	}
	if n := queued.Load(); n != 1 || len(e.q.tasks) != 0 {
		t.Errorf("%d turns queued by Record, %d by Turn; want 1 and none", n, len(e.q.tasks))
	}
}

// On Slack too, a pressed option sends the option's value, not its label: the button carries
// the option's index and the turn stored the values.
func TestChannelSlackChoiceSendsTheValue(t *testing.T) {
	e := askPlans(t, "Free plan", "Pro plan", func(ask string) (channelstest.Delivery, string) {
		mention := withText(t, "slack/app_mention.json", "is it everything a river should be?", ask)
		return channelstest.SlackDelivery(slackSecret, mention, time.Now()), "/channels/slack/webhook"
	})
	posts := e.slack.Acknowledged(slack.MethodPostMessage)
	if len(posts) != 1 {
		t.Fatalf("%d posts, want the question", len(posts))
	}
	var question struct {
		Blocks []struct {
			Elements []struct {
				Value string `json:"value"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(posts[0].Body, &question); err != nil {
		t.Fatal(err)
	}
	var pro string
	for _, b := range question.Blocks {
		for _, el := range b.Elements {
			if strings.HasSuffix(el.Value, ":1") {
				pro = el.Value
			}
		}
	}
	if cb, err := channels.DecodeCallback(pro); err != nil || cb.Kind != channels.ActionChoice || cb.Option != 1 {
		t.Fatalf("the second button carries %q (%+v, %v), want the question's option 1", pro, cb, err)
	}
	press := strings.ReplaceAll(string(channelstest.Fixture(t, "slack/block_actions.json")), "a:apr_k3j5n7p9q2r4s6t8:y", pro)
	press = strings.ReplaceAll(press, `"text": "Approve"`, `"text": "Pro plan"`)
	if r := e.deliver(channelstest.SlackInteractiveDelivery(slackSecret, []byte(press), time.Now()), "/channels/slack/interactive"); r.Status != http.StatusOK || r.JSON["outcome"] != "answered" {
		t.Fatalf("press: %d %v", r.Status, r.JSON)
	}
	e.drain()
	posts = e.slack.Acknowledged(slack.MethodPostMessage)
	var last slack.PostMessage
	if err := json.Unmarshal(posts[len(posts)-1].Body, &last); err != nil || last.Text != "echo: pro" {
		t.Errorf("last post %+v, %v; want the turn of the value pro", last, err)
	}
}

// AfterAcks waits while a delivery is being acknowledged (its intake in flight) and returns
// once it is answered; with none in flight, or past its bound, it returns at once.
func TestChannelTurnsWaitForAcks(t *testing.T) {
	e := startChannels(t, nil)
	e.host.AfterAcks(t.Context(), time.Hour) // nothing in flight: at once
	entered, release := make(chan struct{}), make(chan struct{})
	e.host.Record = func(ctx context.Context, ds []runtime.Delivery) ([]runtime.Recorded, error) {
		close(entered)
		<-release
		return make([]runtime.Recorded, len(ds)), nil
	}
	answered := make(chan int)
	go func() {
		answered <- e.deliver(channelstest.SlackDelivery(slackSecret, mention(t, 1), time.Now()), "/channels/slack/webhook").Status
	}()
	<-entered
	start := time.Now()
	e.host.AfterAcks(t.Context(), 20*time.Millisecond) // in flight: waits for the bound
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("AfterAcks returned after %s with a delivery in flight", waited)
	}
	waited := make(chan struct{})
	go func() { e.host.AfterAcks(t.Context(), time.Hour); close(waited) }()
	select {
	case <-waited:
		t.Fatal("AfterAcks returned while the delivery was still being acknowledged")
	case <-time.After(10 * time.Millisecond):
	}
	close(release)
	if s := <-answered; s != http.StatusOK {
		t.Errorf("delivery: %d", s)
	}
	<-waited // the acknowledgement ends the wait
}
