package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/runner/durable"
)

// TestDurableSleepWakesThroughTheQueue: a sleeping run is woken by a durable:wake task of the
// platform's queue and completes: the database queue under svc up (SQLite), and asynq's
// scheduled tasks with the api, worker and runner roles on Postgres, Redis and S3.
func TestDurableSleepWakesThroughTheQueue(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		clearSVCEnv(t)
		dataDir := t.TempDir()
		p := startPlatformAt(t, dataDir)
		a := newFlowAgent(t, p, "sleeper")
		deployFlow(t, p, a.AgentID, flowFiles(t, "A"))
		testSleep(t, p.url, a, openRuns(t, "sqlite:"+filepath.Join(dataDir, "svc.db")), nil)
	})
	t.Run("redis", func(t *testing.T) {
		const admin = "pk_durable_sleep_admin_token_0123456789"
		common, dbURL, rdb := scaleOutFlags(t, 9, admin)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		t.Cleanup(func() { cancel(); wg.Wait() })
		if out, err := execute(ctx, "migrate", "--database-url", dbURL); err != nil {
			t.Fatalf("svc migrate: %v\n%s", err, out)
		}
		apiAddr, runnerAddr := freeAddr(t), freeAddr(t)
		for _, args := range [][]string{
			append([]string{"api", "--addr", apiAddr}, roleFlags(forAPI, common)...),
			append([]string{"worker"}, roleFlags(forWorker, common)...),
			append([]string{"runner", "--addr", runnerAddr}, roleFlags(forRunner, common)...),
		} {
			wg.Go(func() {
				if out, err := execute(ctx, args...); err != nil {
					t.Errorf("svc %s: %v\n%s", args[0], err, out)
				}
			})
		}
		waitHealthy(t, "http://"+apiAddr+"/health")
		waitHealthy(t, "http://"+runnerAddr+"/health")
		p := &benchPlatform{url: "http://" + apiAddr, token: admin}
		a := newFlowAgent(t, p, "sleeper")
		deployID := deployFlow(t, p, a.AgentID, flowFiles(t, "A"))
		// The runner serves the deployment once it learns it is active.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			s, out := agentCall(t, "http://"+runnerAddr, a, "GET", "/health", nil)
			if s == 200 && out["deployId"] == deployID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the runner does not serve %s: %d %v", deployID, s, out)
			}
		}
		runs := openRuns(t, dbURL)
		// The wake-up is a scheduled asynq task (its id names the run and the time), unless it ran.
		scheduled := func(id string, at time.Time) {
			taskID := "durable:" + id + ":" + strconv.FormatInt(at.UnixMilli(), 10)
			keys, err := rdb.Keys(t.Context(), "asynq:{*}:t:"+taskID).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) == 0 {
				if run, _ := runs.Get(t.Context(), a.AgentID, id); run.Status == durable.Sleeping {
					all, _ := rdb.Keys(t.Context(), "asynq:*").Result()
					t.Errorf("no asynq task %s for the sleeping run; keys %q", taskID, all)
				}
			}
		}
		testSleep(t, "http://"+runnerAddr, a, runs, scheduled)
	})
}

// testSleep starts a sleeping run through the agent's URL at base and waits for the queue to wake
// it; scheduled, when not nil, checks the wake-up of run id at wakeAt is on the queue.
func testSleep(t *testing.T, base string, a *flowAgent, runs durable.Store, scheduled func(id string, wakeAt time.Time)) {
	t.Helper()
	res := chatFlow(t, base, a, "sleep")
	id, _ := res["session_id"].(string)
	wakeAt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(res["wake_at"]))
	if !strings.HasPrefix(id, "dur_") || res["status"] != durable.Sleeping || err != nil {
		t.Fatalf("tool result %v: want a sleeping durable session with its wake_at", res)
	}
	if scheduled != nil {
		scheduled(id, wakeAt)
	}
	if run, err := runs.Get(t.Context(), a.AgentID, id); err != nil || run.Status != durable.Sleeping && run.Status != durable.Running && run.Status != durable.Completed {
		t.Fatalf("run after the chat = %+v, %v", run, err)
	}
	run := waitRun(t, runs, a.AgentID, id, durable.Completed, time.Minute)
	if r := resultOf(t, run); r["woke"] != true {
		t.Errorf("result %s: want woke", run.Result)
	}
	if n, _ := journalCount(t, runs, id); n["sleep#1"] != 1 || n["step:first#1"] != 1 {
		t.Errorf("journal %v: want the first step and the wake-up once each", n)
	}
}

// TestDurableAnswerOnAnotherDeployment: a run parked on deployment A is answered through the
// agent's URL after deployment B took it over; the run resumes and completes on A's bundle,
// while a new run of the same tool runs on B.
func TestDurableAnswerOnAnotherDeployment(t *testing.T) {
	clearSVCEnv(t)
	p := startPlatformAt(t, t.TempDir())
	a := newFlowAgent(t, p, "versions")
	depA := deployFlow(t, p, a.AgentID, flowFiles(t, "A"))
	res := chatFlow(t, p.url, a, "park")
	id, _ := res["session_id"].(string)
	if !strings.HasPrefix(id, "dur_") || res["status"] != durable.AwaitingInput {
		t.Fatalf("tool result %v: want an awaiting-input durable session", res)
	}

	depB := deployFlow(t, p, a.AgentID, flowFiles(t, "B"))
	if depB == depA {
		t.Fatalf("the second deployment is the first: %s", depA)
	}
	if s, out := agentCall(t, p.url, a, "GET", "/health", nil); s != 200 || out["deployId"] != depB {
		t.Fatalf("the agent's URL after activating B = %d %v", s, out)
	}
	if res := chatFlow(t, p.url, a, "quick"); res["version"] != "B" {
		t.Fatalf("a new run after the activation of B = %v, want version B", res)
	}

	if s, rec := agentCall(t, p.url, a, "POST", "/api/sessions/"+id+"/answer", map[string]any{"value": true}); s != 200 || rec["status"] != durable.Running {
		t.Fatalf("answer = %d %v", s, rec)
	}
	rec := waitRecord(t, p.url, a, id, durable.Completed)
	result, _ := rec["result"].(map[string]any)
	if result["approved"] != true {
		t.Fatalf("the answered run = %v", rec)
	}
	if result["version"] != "A" || rec["deploy_id"] != depA {
		t.Errorf("the answered run ran on %v (deploy_id %v), want A's bundle (%s)", result["version"], rec["deploy_id"], depA)
	}
}
