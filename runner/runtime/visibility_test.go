package runtime_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"svc/runner/durable"
	"svc/runner/durable/durabletest"
	"svc/runner/durable/engine"
	"svc/runner/runtime"
)

// TestDurableVisibility is CONTRACT §8's last paragraph with two users and a scoped token on one
// agent (issue 26's three bugs): GET /api/events sends each subscriber the session_updated of
// the runs it may GET and nothing else (alice never learns of bob's runs; alice-with-scope-s1
// gets her s1 run, which the chat-session cache never held); answer, cancel, restart and GET of a
// run the caller may not see are 404, the same as an unknown id.
func TestDurableVisibility(t *testing.T) {
	sg := newSigner(t)
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), AgentID: agentID, DeployID: "dep_1", Verifier: sg.s,
		Durable: durableEngine(t, engine.Config{Store: &durable.Memory{}})})
	alice, bob, aliceS1 := sg.token(agentID, "alice", ""), sg.token(agentID, "bob", ""), sg.token(agentID, "alice", "s1")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a broken filter fails, not hangs
	defer cancel()
	subscribe := func(token string) io.ReadCloser {
		resp, err := e.srv.Client().Do(e.request("GET", "/api/events", token, nil).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp.Body
	}
	streams := map[string]io.ReadCloser{"alice": subscribe(alice), "bob": subscribe(bob), "alice-s1": subscribe(aliceS1)}

	refund := func(token string) string {
		fs := e.chat(token, map[string]any{"message": `/tool refund_request {"customer_id":"c1","amount_eur":900,"reason":"double charge"}`})
		parked := ofType(fs, "durable_approval_required")
		if len(parked) != 1 {
			t.Fatalf("frames %v: want one durable_approval_required", types(fs))
		}
		return str(parked[0].Data["session_id"])
	}
	runA, runB, runC := refund(alice), refund(bob), refund(aliceS1)

	// A run the caller may not see is missing, on every route; one it sees is not.
	for _, c := range []struct {
		who, token, run string
	}{{"bob", bob, runA}, {"alice", alice, runB}, {"alice-s1", aliceS1, runA}, {"bob", bob, runC}} {
		for _, call := range []struct{ method, path string }{
			{"GET", "/api/sessions/" + c.run}, {"POST", "/api/sessions/" + c.run + "/answer"},
			{"POST", "/api/sessions/" + c.run + "/cancel"}, {"POST", "/api/sessions/" + c.run + "/restart"},
		} {
			var body any
			if strings.HasSuffix(call.path, "/answer") {
				body = map[string]any{"value": "approve"}
			}
			if r := e.do(call.method, call.path, c.token, body); r.Status != 404 || r.JSON["error"] != "not_found" {
				t.Errorf("%s %s by %s = %d %s, want 404 as an unknown id", call.method, call.path, c.who, r.Status, r.Body)
			}
		}
	}
	// Alice sees her run and may not answer it (finance-lead may): only she learns that.
	if r := e.do("POST", "/api/sessions/"+runA+"/answer", alice, map[string]any{"value": "approve"}); r.Status != 403 || r.JSON["error"] != "not_eligible_answerer" {
		t.Errorf("alice's answer to her own run = %d %s, want 403 not_eligible_answerer", r.Status, r.Body)
	}
	if r := e.do("GET", "/api/sessions/"+runC, aliceS1, nil); r.Status != 200 {
		t.Errorf("alice-s1 GET of her s1 run = %d %s", r.Status, r.Body)
	}

	// Each cancels its own run, alice last: once a subscriber has its own run's cancellation it
	// has been sent everything published before.
	for _, c := range []struct{ token, run string }{{bob, runB}, {aliceS1, runC}, {alice, runA}} {
		if r := e.do("POST", "/api/sessions/"+c.run+"/cancel", c.token, nil); r.Status != 200 {
			t.Fatalf("cancel %s = %d %s", c.run, r.Status, r.Body)
		}
	}
	for who, c := range map[string]struct {
		last    string
		allowed []string
	}{
		"alice":    {runA, []string{runA, runC}}, // her s1 run too: she has no scope claim
		"bob":      {runB, []string{runB}},
		"alice-s1": {runC, []string{runC}},
	} {
		seen := durabletest.SessionUpdates(t, streams[who], c.last)
		for _, id := range seen {
			if !strings.Contains(strings.Join(c.allowed, " "), id) {
				t.Errorf("%s received session_updated of %s; it may read only %v", who, id, c.allowed)
			}
		}
		if len(seen) == 0 {
			t.Errorf("%s received nothing", who)
		}
	}
}

// sessionUpdates reads session_updated frames from an event stream until one says that run last
