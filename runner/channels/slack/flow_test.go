package slack_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
)

// route is the smallest wiring of the package, in the order the runtime's route will call it:
// verify the raw body, parse, dedupe the delivery, answer 200; the reply is rendered and sent
// after (here at once, by the outbox later). seen and answered stand in for the database.
type route struct {
	client   *slack.Client
	mu       sync.Mutex
	seen     map[string]bool
	answered map[string]bool
	replies  int
}

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := slack.Verify(r.Header, body, secret, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	ev, err := slack.Parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var reqs []channels.Request
	var key string
	switch ev := ev.(type) {
	case channels.Challenge:
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": ev.Value})
		return
	case *channels.Message:
		rt.mu.Lock()
		dup := rt.seen[ev.DeliveryID]
		rt.seen[ev.DeliveryID] = true
		rt.mu.Unlock()
		if dup {
			return
		}
		reqs, err = slack.Render(ev.Reply, []channels.Part{channels.TextPart("echo: " + ev.Text), channels.ApprovalPart("apr_1", "Go on?")})
		key = ev.DeliveryID
	case *channels.Action:
		rt.mu.Lock()
		outcome := channels.AckAnswered
		if rt.answered[ev.ID] {
			outcome = channels.AckAlreadyAnswered
		}
		rt.answered[ev.ID] = true
		rt.mu.Unlock()
		reqs, err = slack.RenderAck(ev, outcome)
		key = ev.DeliveryID
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for i, req := range reqs {
		req.IdempotencyKey = key + "/" + string(rune('0'+i))
		if _, err := rt.client.Send(r.Context(), req); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}
}

// TestFlow: a mention is answered in its thread, Slack's retry of it is not, a bad signature is
// 401 with nothing sent, and an approval pressed twice is answered once.
func TestFlow(t *testing.T) {
	fake := channelstest.NewSlack(t)
	rt := &route{client: &slack.Client{BaseURL: fake.URL, Token: fake.Token}, seen: map[string]bool{}, answered: map[string]bool{}}
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	deliver := func(d channelstest.Delivery, path string) int {
		t.Helper()
		req, err := d.NewRequest(t.Context(), srv.URL+path)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	now := time.Now()
	mention := channelstest.Fixture(t, "slack/app_mention.json")

	if got := deliver(channelstest.SlackDelivery("wrong", mention, now), "/channels/slack/webhook"); got != http.StatusUnauthorized {
		t.Errorf("bad signature: %d, want 401", got)
	}
	if got := deliver(channelstest.SlackDelivery(secret, mention, now.Add(-10*time.Minute)), "/channels/slack/webhook"); got != http.StatusUnauthorized {
		t.Errorf("stale timestamp: %d, want 401", got)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Fatalf("%d calls after refused deliveries, want none", n)
	}
	for retry := range 2 {
		var opts []channelstest.DeliveryOption
		if retry > 0 {
			opts = append(opts, channelstest.WithRetryNum(retry))
		}
		if got := deliver(channelstest.SlackDelivery(secret, mention, now, opts...), "/channels/slack/webhook"); got != http.StatusOK {
			t.Fatalf("delivery %d: %d, want 200", retry, got)
		}
	}
	posts := fake.Acknowledged(slack.MethodPostMessage)
	if len(posts) != 2 {
		t.Fatalf("%d messages posted, want the answer and the prompt once", len(posts))
	}
	var answer slack.PostMessage
	_ = json.Unmarshal(posts[0].Body, &answer)
	if answer.ThreadTS != "1515449522.000016" || answer.Text != "echo: is it everything a river should be?" {
		t.Errorf("answer %+v, want the echo in the mention's thread", answer)
	}

	press := strings.ReplaceAll(string(channelstest.Fixture(t, "slack/block_actions.json")), "apr_k3j5n7p9q2r4s6t8", "apr_1")
	for i := range 2 {
		second := strings.Replace(press, `"trigger_id": "12466734323`, `"trigger_id": "2`+string(rune('0'+i)), 1)
		if got := deliver(channelstest.SlackInteractiveDelivery(secret, []byte(second), now), "/channels/slack/interactive"); got != http.StatusOK {
			t.Fatalf("press %d: %d, want 200", i, got)
		}
	}
	updates, notices := fake.Acknowledged(slack.MethodUpdate), fake.Acknowledged(slack.MethodPostEphemeral)
	if len(updates) != 1 || !strings.Contains(string(updates[0].Body), "Approved by <@U061F7AUR>") {
		t.Errorf("updates %v, want one showing the approval", updates)
	}
	if len(notices) != 1 || !strings.Contains(string(notices[0].Body), "already answered") {
		t.Errorf("notices %v, want one saying it was already answered", notices)
	}
	if dups := fake.Duplicates(); len(dups) != 0 {
		t.Errorf("duplicates %v", dups)
	}
}
