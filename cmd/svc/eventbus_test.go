package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/runner/durable"
	"svc/runner/durable/durabletest"
)

// TestEventBusAcrossRunners is issue 26's event bus test (CONTRACT §8 Visibility): two runner
// roles sharing Postgres and Redis, runtime tokens of alice, bob and alice with scope_id s1, and
// a GET /api/events subscriber of each on each runner. Durable runs parked on either runner reach
// every runner's subscribers, each of which receives session_updated of exactly the runs it may
// read: alice hers and her s1 run (she has no scope claim), bob his, alice-s1 only her s1 run.
func TestEventBusAcrossRunners(t *testing.T) {
	const admin = "pk_event_bus_admin_token_0123456789"
	common, dbURL, _ := scaleOutFlags(t, 10, admin)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	if out, err := execute(ctx, "migrate", "--database-url", dbURL); err != nil {
		t.Fatalf("svc migrate: %v\n%s", err, out)
	}
	apiAddr, runner1, runner2 := freeAddr(t), freeAddr(t), freeAddr(t)
	for _, args := range [][]string{
		append([]string{"api", "--addr", apiAddr}, roleFlags(forAPI, common)...),
		append([]string{"worker"}, roleFlags(forWorker, common)...),
		append([]string{"runner", "--addr", runner1}, roleFlags(forRunner, common)...),
		append([]string{"runner", "--addr", runner2}, roleFlags(forRunner, common)...),
	} {
		wg.Go(func() {
			if out, err := execute(ctx, args...); err != nil {
				t.Errorf("svc %s: %v\n%s", args[0], err, out)
			}
		})
	}
	for _, addr := range []string{apiAddr, runner1, runner2} {
		waitHealthy(t, "http://"+addr+"/health")
	}
	p := &benchPlatform{url: "http://" + apiAddr, token: admin}
	a := newFlowAgent(t, p, "event bus")
	deployID := deployFlow(t, p, a.AgentID, flowFiles(t, "A"))
	bases := []string{"http://" + runner1, "http://" + runner2}
	for _, base := range bases { // each runner serves the deployment once it learns it is active
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			s, out := agentCall(t, base, a, "GET", "/health", nil)
			if s == 200 && out["deployId"] == deployID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not serve %s: %d %v", base, deployID, s, out)
			}
		}
	}

	as := func(user, scope string) *flowAgent {
		var tok struct{ Token string }
		body := map[string]any{"user_id": user, "scope_id": scope, "ttl": 3600}
		if s := p.call(t, "POST", "/api/agents/"+a.AgentID+"/tokens", body, nil, &tok); s != 201 {
			t.Fatalf("mint token of %s/%s = %d", user, scope, s)
		}
		return &flowAgent{AgentID: a.AgentID, Slug: a.Slug, token: tok.Token}
	}
	callers := map[string]*flowAgent{"alice": as("alice", ""), "bob": as("bob", ""), "alice-s1": as("alice", "s1")}

	// A subscriber of each caller on each runner; a broken filter fails the test, not hangs it.
	subCtx, subCancel := context.WithTimeout(ctx, 3*time.Minute)
	defer subCancel()
	type subscriber struct{ who, base string }
	streams := map[subscriber]io.Reader{}
	for who, c := range callers {
		for _, base := range bases {
			req, err := http.NewRequestWithContext(subCtx, "GET", base+"/api/events", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = c.Slug + ".apps.localhost"
			req.Header.Set("Authorization", "Bearer "+c.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = resp.Body.Close() }) // a stream read to our marker; nothing to flush
			if resp.StatusCode != 200 {
				t.Fatalf("GET /api/events of %s on %s = %d", who, base, resp.StatusCode)
			}
			streams[subscriber{who, base}] = resp.Body
		}
	}

	park := func(who, base string) string {
		res := chatFlow(t, base, callers[who], "park")
		id, _ := res["session_id"].(string)
		if !strings.HasPrefix(id, "dur_") || res["status"] != durable.AwaitingInput {
			t.Fatalf("%s's tool result %v: want an awaiting-input durable session", who, res)
		}
		return id
	}
	cancelRun := func(who, base, id string) {
		if s, out := agentCall(t, base, callers[who], "POST", "/api/sessions/"+id+"/cancel", nil); s != 200 {
			t.Fatalf("%s's cancel of %s = %d %v", who, id, s, out)
		}
	}
	// The runs under test: alice's on runner 1, bob's on runner 2, alice-s1's on runner 1; each
	// cancelled by its owner on the other runner.
	runA, runB, runC := park("alice", bases[0]), park("bob", bases[1]), park("alice-s1", bases[0])
	cancelRun("bob", bases[0], runB)
	cancelRun("alice-s1", bases[1], runC)
	cancelRun("alice", bases[1], runA)
	// Then a marker of each caller, parked and cancelled after every event of the runs under
	// test was published: once a subscriber has its marker's cancellation, it has been sent all
	// of those it will ever get.
	markers := map[string]string{}
	for i, who := range []string{"alice", "bob", "alice-s1"} {
		markers[who] = park(who, bases[i%2])
		cancelRun(who, bases[(i+1)%2], markers[who])
	}

	want := map[string][]string{"alice": {runA, runC}, "bob": {runB}, "alice-s1": {runC}}
	// The other markers a subscriber may read: alice's sessions include her s1 ones.
	mayRead := map[string][]string{
		"alice": {markers["alice"], markers["alice-s1"]}, "bob": {markers["bob"]}, "alice-s1": {markers["alice-s1"]},
	}
	under := []string{runA, runB, runC}
	for sub, r := range streams {
		seen := durabletest.SessionUpdates(t, r, markers[sub.who])
		var got []string
		for _, id := range seen {
			switch {
			case slices.Contains(under, id):
				if !slices.Contains(got, id) {
					got = append(got, id)
				}
			case !slices.Contains(mayRead[sub.who], id):
				t.Errorf("%s on %s received session_updated of %s, which it may not read", sub.who, sub.base, id)
			}
		}
		slices.Sort(got)
		w := slices.Clone(want[sub.who])
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s on %s received session_updated of %v of the runs under test, want exactly %v", sub.who, sub.base, got, w)
		}
	}
}

// readUntilCancelled reads session_updated frames from an event stream until one says that run
