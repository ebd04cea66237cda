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
// between the delivery and the reply, in the turn (SVC_FAULT=channel.turn) or right after it
// enqueued the turns of the delivery's batch, before that task is done (channel.turns, so the
// batch's task runs again and enqueues the turn a second time); once another worker takes the
// tasks back, the reply arrives, once.
func TestChannelReplySurvivesAKilledWorker(t *testing.T) {
	for _, point := range []string{"channel.turn", "channel.turns"} {
		t.Run(point, func(t *testing.T) { replySurvivesAKilledWorker(t, point) })
	}
}

func replySurvivesAKilledWorker(t *testing.T, point string) {
	fake := channelstest.NewSlack(t)
	c := startCluster(t, 6)
	c.settings["SVC_SLACK_API_URL"] = fake.URL
	// worker1 alone, armed, takes the tasks: the build first, then the turn it dies in.
	c.proc("worker2").Kill()
	c.proc("worker1").Restart(point)

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

	d := channelstest.SlackDelivery(upSlackSecret, channelstest.Fixture(t, "slack/app_mention.json"), time.Now())
	req, err := d.NewRequest(context.Background(), c.next("runner")+"/channels/slack/webhook")
	if err != nil {
		t.Fatal(err)
	}
	req.Host = a.Slug + ".apps.localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delivery = %d", resp.StatusCode)
	}
	c.proc("worker1").WaitDied(2 * time.Minute)
	if n := len(fake.Calls()); n != 0 {
		t.Fatalf("%d calls before the turn ran", n)
	}
	c.proc("worker2").Start("")
	for deadline := time.Now().Add(3 * time.Minute); len(fake.Acknowledged(slack.MethodPostMessage)) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no reply 3 minutes after the worker died")
		}
	}
	if posts, dups := fake.Acknowledged(slack.MethodPostMessage), fake.Duplicates(); len(posts) != 1 || len(dups) != 0 {
		t.Errorf("%d replies, duplicates %v; want one", len(posts), dups)
	}
}
