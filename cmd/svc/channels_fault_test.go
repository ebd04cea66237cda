package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
)

// TestChannelReplySurvivesAKilledWorker: the worker that takes a mention's turn dies of SIGKILL
// (SVC_FAULT=channel.turn) between the delivery and the reply; once another worker takes the
// task back, the reply arrives, once.
func TestChannelReplySurvivesAKilledWorker(t *testing.T) {
	fake := channelstest.NewSlack(t)
	c := startCluster(t, 6)
	c.settings["SVC_SLACK_API_URL"] = fake.URL
	// worker1 alone, armed, takes the tasks: the build first, then the turn it dies in.
	c.proc("worker2").Kill()
	c.proc("worker1").Restart("channel.turn")
	slug := deployChannelAgent(t, c, fake)
	if s, err := deliverMention(c, slug); err != nil || s != http.StatusOK {
		t.Fatalf("delivery = %d, %v", s, err)
	}
	c.proc("worker1").WaitDied(2 * time.Minute)
	if n := len(fake.Calls()); n != 0 {
		t.Fatalf("%d calls before the turn ran", n)
	}
	c.proc("worker2").Start("")
	waitOneReply(t, fake, "the worker died")
}

// TestChannelReplySurvivesAKilledRunner: the runner that took a mention dies of SIGKILL
// (SVC_FAULT=channel.dispatch) after recording it and before enqueueing its turn on Redis; the
// workers' sweep enqueues the turn, and the reply arrives, once.
func TestChannelReplySurvivesAKilledRunner(t *testing.T) {
	fake := channelstest.NewSlack(t)
	c := startCluster(t, 11)
	c.settings["SVC_SLACK_API_URL"] = fake.URL
	for _, w := range []string{"worker1", "worker2"} { // with the setting
		c.proc(w).Restart("")
	}
	slug := deployChannelAgent(t, c, fake)
	// runner1 alone, armed, takes the delivery.
	c.proc("runner2").Kill()
	c.proc("runner1").Restart("channel.dispatch")
	// The runner dies as it is about to enqueue, after the 200 left, or just before it was
	// written: then the platform sends the delivery again, and it is a duplicate.
	s, err := deliverMention(c, slug)
	c.proc("runner1").WaitDied(2 * time.Minute)
	if err == nil && s != http.StatusOK {
		t.Fatalf("delivery = %d", s)
	}
	if err != nil {
		c.proc("runner2").Start("")
		if s, err := deliverMention(c, slug); err != nil || s != http.StatusOK {
			t.Fatalf("the platform's retry = %d, %v", s, err)
		}
	}
	waitOneReply(t, fake, "the runner died")
}

// deployChannelAgent creates an agent with a Slack channel on fake and deploys it to
// production on the echo model; it returns the agent's slug.
func deployChannelAgent(t *testing.T, c *cluster, fake *channelstest.Slack) string {
	t.Helper()
	var a struct{ AgentID, Slug string }
	if s := c.call("POST", "/api/agents", map[string]any{"name": "desk"}, &a); s != 201 {
		t.Fatalf("create agent = %d", s)
	}
	if s := c.call("PUT", "/api/agents/"+a.AgentID+"/deploy-settings", map[string]any{"autoPromoteProduction": true}, nil); s/100 != 2 {
		t.Fatalf("deploy settings = %d", s)
	}
	for name, value := range map[string]string{"SLACK_SIGNING_SECRET": upSlackSecret, "SLACK_BOT_TOKEN": fake.Token} {
		if s := c.call("PUT", "/api/agents/"+a.AgentID+"/secrets/"+name, map[string]string{"value": value}, nil); s/100 != 2 {
			t.Fatalf("set secret %s = %d", name, s)
		}
	}
	files := map[string]string{
		"svc.json": `{"name": "desk", "version": "1.0.0", "models": {"main": {"provider": "echo", "model": "echo"}},
  "channels": {"slack": {"signingSecret": "env:SLACK_SIGNING_SECRET", "botToken": "env:SLACK_BOT_TOKEN"}}}`,
		"agents/default/AGENT.md": "Be brief.",
	}
	var sv struct{ SourceVersionID string }
	if s := c.call("POST", "/api/agents/"+a.AgentID+"/source-versions", map[string]any{"files": files}, &sv); s/100 != 2 {
		t.Fatalf("upload = %d", s)
	}
	var rd struct{ DeployID string }
	if s := c.call("POST", "/api/deployments/redeploy", map[string]any{"agentId": a.AgentID, "environment": "production", "sourceVersionId": sv.SourceVersionID}, &rd); s/100 != 2 {
		t.Fatalf("redeploy = %d", s)
	}
	if d := c.waitSettled([]string{rd.DeployID}, 3*time.Minute)[rd.DeployID]; d.Status != "ready" || !d.IsActive {
		t.Fatalf("deployment %+v, want ready and active", d)
	}

	return a.Slug
}

// deliverMention posts the app_mention fixture, signed, to the next live runner for slug.
func deliverMention(c *cluster, slug string) (int, error) {
	d := channelstest.SlackDelivery(upSlackSecret, channelstest.Fixture(c.t, "slack/app_mention.json"), time.Now())
	req, err := d.NewRequest(context.Background(), c.next("runner")+"/channels/slack/webhook")
	if err != nil {
		return 0, err
	}
	req.Host = slug + ".apps.localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// waitOneReply waits for fake's first reply, and checks that there is one.
func waitOneReply(t *testing.T, fake *channelstest.Slack, after string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); len(fake.Acknowledged(slack.MethodPostMessage)) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reply 3 minutes after %s", after)
		}
	}
	if posts, dups := fake.Acknowledged(slack.MethodPostMessage), fake.Duplicates(); len(posts) != 1 || len(dups) != 0 {
		t.Errorf("%d replies, duplicates %v; want one", len(posts), dups)
	}
}
