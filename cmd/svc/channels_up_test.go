package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"svc/agent/agenttest"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
)

const upSlackSecret = "up-slack-signing-secret"

// channelAgentDir is an agent on the echo model that Slack talks to, its secrets named in svc.json.
func channelAgentDir(t testing.TB) string {
	t.Helper()
	return agenttest.Write(t, map[string]string{
		"svc.json": `{"name": "desk", "version": "1.0.0", "models": {"main": {"provider": "echo", "model": "echo"}},
  "channels": {"slack": {"signingSecret": "env:SLACK_SIGNING_SECRET", "botToken": "env:SLACK_BOT_TOKEN"}}}`,
		"agents/default/AGENT.md": "Be brief.",
	})
}

// startChannelPlatform runs svc up (with extra flags) with Slack's API at a fake and a deployed
// agent whose secrets are set; it returns the platform, the fake and the agent's slug.
func startChannelPlatform(t testing.TB, extra ...string) (*benchPlatform, *channelstest.Slack, string) {
	t.Helper()
	fake := channelstest.NewSlack(t)
	p := startPlatformAt(t, t.TempDir(), append([]string{"--slack-api-url", fake.URL}, extra...)...)
	a := newAgent(t, p, "desk", true)
	for name, value := range map[string]string{"SLACK_SIGNING_SECRET": upSlackSecret, "SLACK_BOT_TOKEN": fake.Token} {
		if err := admin(p).SetSecret(context.Background(), a.AgentID, name, value); err != nil {
			t.Fatal(err)
		}
	}
	if d := deployDir(t, p, a.AgentID, channelAgentDir(t), "production"); d.Status != "ready" {
		t.Fatalf("deployment %+v, want ready", d)
	}
	return p, fake, a.Slug
}

// deliverTo posts d to path on the agent host of slug and returns the status.
func deliverTo(t testing.TB, p *benchPlatform, slug, path string, d channelstest.Delivery) int {
	t.Helper()
	req, err := d.NewRequest(context.Background(), p.url+path)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = slug + ".apps.localhost"
	resp, err := benchClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to the end, so that the connection is kept
	resp.Body.Close()
	return resp.StatusCode
}

// waitPosts waits until the fake acknowledged n chat.postMessage calls, and returns them.
func waitPosts(t testing.TB, fake *channelstest.Slack, n int) []channelstest.Call {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if posts := fake.Acknowledged(slack.MethodPostMessage); len(posts) >= n {
			return posts
		}
	}
	t.Fatalf("%d of %d replies posted", len(fake.Acknowledged(slack.MethodPostMessage)), n)
	return nil
}

// TestChannelsOnUp: on svc up, a Slack mention and its retry get one reply, in the thread,
// through the queue and the outbox; a bad signature is 401.
func TestChannelsOnUp(t *testing.T) {
	p, fake, slug := startChannelPlatform(t)
	mention := channelstest.Fixture(t, "slack/app_mention.json")
	now := time.Now()
	if s := deliverTo(t, p, slug, "/channels/slack/webhook", channelstest.SlackDelivery("wrong", mention, now)); s != http.StatusUnauthorized {
		t.Errorf("bad signature = %d, want 401", s)
	}
	if s := deliverTo(t, p, slug, "/channels/slack/webhook", channelstest.SlackDelivery(upSlackSecret, mention, now)); s != http.StatusOK {
		t.Fatalf("delivery = %d", s)
	}
	if s := deliverTo(t, p, slug, "/channels/slack/webhook", channelstest.SlackDelivery(upSlackSecret, mention, now, channelstest.WithRetryNum(1))); s != http.StatusOK {
		t.Fatalf("retry = %d", s)
	}
	posts := waitPosts(t, fake, 1)
	var answer slack.PostMessage
	if err := json.Unmarshal(posts[0].Body, &answer); err != nil {
		t.Fatal(err)
	}
	if answer.ThreadTS != "1515449522.000016" || answer.Text != "echo: is it everything a river should be?" {
		t.Errorf("answer %+v, want the echo in the mention's thread", answer)
	}
	// A later message of the thread is answered too: the retry was not.
	reply := []byte(`{"type":"event_callback","team_id":"T061EG9R6","event_id":"Ev2","event":{"type":"app_mention","user":"U061F7AUR",
"text":"<@U0LAN0Z89> and now?","ts":"1515449600.000001","thread_ts":"1515449522.000016","channel":"C0LAN2Q65"},
"authorizations":[{"user_id":"U0LAN0Z89","is_bot":true}]}`)
	if s := deliverTo(t, p, slug, "/channels/slack/webhook", channelstest.SlackDelivery(upSlackSecret, reply, time.Now())); s != http.StatusOK {
		t.Fatalf("second message = %d", s)
	}
	posts = waitPosts(t, fake, 2)
	if len(posts) != 2 || len(fake.Duplicates()) != 0 {
		t.Errorf("%d replies, duplicates %v; want 2 and none", len(posts), fake.Duplicates())
	}
}
