package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFaultAutomationsFireOnce: 100 fire times, one per scheduler tick, on two api, two worker
// and two runner processes over Postgres and Redis. worker1 dies with SIGKILL at its 20th claim
// (the fire claimed, its task not yet enqueued) and worker2 in its 15th run (its session
// started, its turn not run), and both come back. Every fire time runs exactly once: one fire
// per automation at its time, none left queued, at most one session per fire, a session for
// every fire that is done, and the fire killed mid-run failed as interrupted, not run again.
func TestFaultAutomationsFireOnce(t *testing.T) {
	skipShortLocally(t)
	t.Parallel()
	c := startCluster(t, 5)
	const tick = 200 * time.Millisecond
	c.settings["SVC_AUTOMATION_TICK"] = tick.String()
	c.proc("worker1").Restart("automation.claim:20")
	c.proc("worker2").Restart("automation.run:15")
	g := c.gitAgent("fault automations")
	first := g.push("main", g.first)
	c.waitSettled([]string{first}, 3*time.Minute)
	c.waitServed(g, first)

	const n = 100
	start := time.Now().Add(5 * time.Second).Truncate(time.Second)
	want := map[string]time.Time{} // automation id → its fire time
	for i := range n {
		at := start.Add(time.Duration(i) * tick).UTC()
		base := "http://" + c.proc(fmt.Sprintf("runner%d", i%2+1)).addr
		s, out, err := agentDo(t.Context(), base, g.flowAgent, "POST", "/api/automations", map[string]any{
			"name": fmt.Sprintf("tick %d", i), "trigger": map[string]any{"at": at.Format(time.RFC3339Nano)},
			"action": map[string]any{"message": fmt.Sprintf("tick %d", i)}, "overlap": "allow",
		})
		if err != nil || s != 201 {
			t.Fatalf("create automation %d: %d %v %v", i, s, out, err)
		}
		want[fmt.Sprint(out["id"])] = at
	}
	if time.Now().After(start) {
		t.Logf("creating the automations took past the first fire time by %s", time.Since(start).Round(time.Millisecond))
	}
	w1, w2 := c.proc("worker1"), c.proc("worker2")
	w1.WaitDied(time.Minute)
	t.Logf("worker1 died at its 20th claim, %s after the first fire time", time.Since(start).Round(time.Millisecond))
	w1.Start("")
	w2.WaitDied(time.Minute)
	t.Logf("worker2 died in its 15th run, %s after the first fire time", time.Since(start).Round(time.Millisecond))
	w2.Start("")

	// Every fire ends: done, or failed as interrupted by a kill.
	type fireRow struct {
		AutomationID string
		FireTime     time.Time
		Status       string
		SessionID    string
		Error        string
	}
	var fires []fireRow
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		fires = nil
		if err := c.db.Raw(`SELECT automation_id, fire_time, status, session_id, error FROM automation_fires`).Scan(&fires).Error; err != nil {
			t.Fatal(err)
		}
		ended := 0
		for _, f := range fires {
			if f.Status == "done" || f.Status == "failed" {
				ended++
			}
		}
		if ended >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes %d of %d fires ended: %+v", ended, n, fires)
		}
	}
	// Let anything that would fire twice do so before counting.
	time.Sleep(10 * tick)
	fires = nil
	if err := c.db.Raw(`SELECT automation_id, fire_time, status, session_id, error FROM automation_fires`).Scan(&fires).Error; err != nil {
		t.Fatal(err)
	}
	perAutomation := map[string]int{}
	interrupted := 0
	for _, f := range fires {
		perAutomation[f.AutomationID]++
		at, ok := want[f.AutomationID]
		switch {
		case !ok:
			t.Errorf("a fire of an unknown automation %s", f.AutomationID)
		case !f.FireTime.Equal(at):
			t.Errorf("automation %s fired at %s, want %s", f.AutomationID, f.FireTime.UTC(), at)
		}
		switch f.Status {
		case "done":
			if f.SessionID == "" {
				t.Errorf("fire of %s is done without a session", f.AutomationID)
			}
		case "failed":
			interrupted++
			if !strings.HasPrefix(f.Error, "interrupted") {
				t.Errorf("fire of %s failed: %s", f.AutomationID, f.Error)
			}
		default:
			t.Errorf("fire of %s is %s", f.AutomationID, f.Status)
		}
	}
	for id := range want {
		if perAutomation[id] != 1 {
			t.Errorf("invariant: automation %s has %d fires, want exactly 1", id, perAutomation[id])
		}
	}
	// At most one session per fire: the sessions tagged with each automation.
	var metas []string
	if err := c.db.Raw(`SELECT metadata FROM sessions WHERE agent_id = ?`, g.AgentID).Scan(&metas).Error; err != nil {
		t.Fatal(err)
	}
	sessions := map[string]int{}
	for _, m := range metas {
		var md map[string]string
		if json.Unmarshal([]byte(m), &md) == nil && md["automation_id"] != "" {
			sessions[md["automation_id"]]++
		}
	}
	for id := range want {
		if sessions[id] > 1 {
			t.Errorf("invariant: automation %s ran %d sessions, want at most 1", id, sessions[id])
		}
	}
	t.Logf("%d fires, %d interrupted by the kills, %d sessions", len(fires), interrupted, len(sessions))
	if interrupted == 0 {
		t.Error("no fire was interrupted: worker2 died in a run, which must end failed as interrupted")
	}
}
