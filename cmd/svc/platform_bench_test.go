package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/agent/agenttest"
	"svc/builder/gittest"
	"svc/migrations"
)

// benchPlatform is svc up running in this process on a fresh data dir.
type benchPlatform struct {
	url, token string
	cancel     func()
}

// dataDB opens the SQLite database of svc up's dataDir beside the running platform (to seed or
// read what no route does), closed when the test ends.
func dataDB(tb testing.TB, dataDir string) *gorm.DB {
	tb.Helper()
	db, err := migrations.Open(context.Background(), "sqlite:"+filepath.Join(dataDir, "svc.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			_ = s.Close()
		}
	})
	return db
}

func startPlatform(tb testing.TB) *benchPlatform { return startPlatformAt(tb, tb.TempDir()) }

// startPlatformAt runs svc up on dataDir (which may hold an earlier run's data), with extra
// flags after the usual ones.
func startPlatformAt(tb testing.TB, dataDir string, extra ...string) *benchPlatform {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		args := append([]string{"up", "--data-dir", dataDir, "--addr", addr, "--log-level", "error", "--log-format", "json"}, extra...)
		if out, err := execute(ctx, args...); err != nil {
			tb.Errorf("svc up: %v\n%s", err, out)
		}
	})
	p := &benchPlatform{url: "http://" + addr, cancel: func() { cancel(); wg.Wait() }}
	tb.Cleanup(p.cancel)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		// svc up listens before it writes the admin token and serves after: read the token once
		// it serves, not while the file may still be empty.
		if resp, err := http.Get(p.url + "/health"); err == nil {
			resp.Body.Close()
			if b, err := os.ReadFile(filepath.Join(dataDir, "admin-token")); err == nil {
				p.token = strings.TrimSpace(string(b))
				return p
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatal("svc up did not start")
	return nil
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// requestBody is a test request's body: nothing, raw bytes, or anything else as JSON.
func requestBody(body any) io.Reader {
	switch b := body.(type) {
	case nil:
		return http.NoBody
	case []byte:
		return bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		return bytes.NewReader(j)
	}
}

// call makes a platform call and decodes the answer into out (when not nil).
func (p *benchPlatform) call(tb testing.TB, method, path string, body any, hdr map[string]string, out any) int {
	tb.Helper()
	req, _ := http.NewRequest(method, p.url+path, requestBody(body))
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := benchClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// gitAgent creates an agent with a git source at repo, autoDeploy and autoPromoteProduction on.
func (p *benchPlatform) gitAgent(tb testing.TB, name, repo string) string {
	tb.Helper()
	var a struct{ AgentID string }
	if s := p.call(tb, "POST", "/api/agents", map[string]any{"name": name}, nil, &a); s != 201 {
		tb.Fatalf("create agent = %d", s)
	}
	p.call(tb, "PUT", "/api/agents/"+a.AgentID+"/source", map[string]any{"type": "git", "url": "file://" + repo}, nil, nil)
	p.call(tb, "PUT", "/api/agents/"+a.AgentID+"/deploy-settings", map[string]any{"autoDeploy": true, "autoPromoteProduction": true}, nil, nil)
	return a.AgentID
}

// push sends a GitHub-shaped push webhook for commit on branch and returns the deployment id.
func (p *benchPlatform) push(tb testing.TB, agentID, repo, branch, commit string) string {
	tb.Helper()
	payload, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/" + branch, "before": strings.Repeat("0", 40), "after": commit,
		"repository": map[string]any{"full_name": "bench/repo", "clone_url": "file://" + repo},
		"pusher":     map[string]any{"name": "bench"}, "head_commit": map[string]any{"id": commit, "message": "bench"},
	})
	var out struct{ Action, DeployID string }
	if s := p.call(tb, "POST", "/webhooks/github?agent="+agentID, payload, map[string]string{"X-GitHub-Event": "push"}, &out); s != 202 || out.Action != "build" {
		tb.Fatalf("push = %d %+v", s, out)
	}
	return out.DeployID
}

// waitServing polls the deployment until it is ready and active.
func (p *benchPlatform) waitServing(tb testing.TB, deployID string) {
	tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var d struct {
			Status   string
			IsActive bool
			Error    string
		}
		p.call(tb, "GET", "/api/deployments/"+deployID, nil, nil, &d)
		if d.Status == "ready" && d.IsActive {
			return
		}
		if d.Status == "failed" {
			tb.Fatalf("deployment %s failed: %s", deployID, d.Error)
		}
		time.Sleep(time.Millisecond)
	}
	tb.Fatalf("deployment %s never served", deployID)
}

// percentile is the q-th quantile (0..1) of ds; 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

// BenchmarkPushToReady measures, on svc up, the time from a push webhook's 202 to the
// deployment serving (ready and active), for the support-desk fixture on a preview branch.
// Run with -benchtime=50x for 50 pushes; p50 and p99 are reported, and sent-p50/p99 from
// sending the webhook (whose answer waits for the fetch of the commit's svc.json).
func BenchmarkPushToReady(b *testing.B) {
	b.Setenv("SUPPORT_DB_URL", filepath.Join(b.TempDir(), "stores.db")) // the fixture's stores
	p := startPlatform(b)
	dir := b.TempDir()
	repo, _ := gittest.Init(b, dir, agenttest.Dir(b, "support-desk"))
	repo.Branch(b, "feature/bench")
	commits := make([]string, b.N)
	for i := range commits {
		if err := os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte(fmt.Sprint("push ", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		commits[i] = repo.Commit(b, "", fmt.Sprint("push ", i))
	}
	agentID := p.gitAgent(b, "desk", dir)
	lat := make([]time.Duration, 0, b.N)
	whole := make([]time.Duration, 0, b.N) // from sending the webhook, its own work included
	b.ResetTimer()
	for i := range b.N {
		sent := time.Now()
		deployID := p.push(b, agentID, dir, "feature/bench", commits[i])
		start := time.Now()
		p.waitServing(b, deployID)
		lat = append(lat, time.Since(start))
		whole = append(whole, time.Since(sent))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(percentile(whole, 0.5).Microseconds())/1000, "sent-p50-ms")
	b.ReportMetric(float64(percentile(whole, 0.99).Microseconds())/1000, "sent-p99-ms")
}

// BenchmarkFiftyAgentsAtOnce sends 50 pushes to 50 agents at the same moment and reports the wall
// time until all 50 deployments serve; none may be lost.
func BenchmarkFiftyAgentsAtOnce(b *testing.B) {
	b.Setenv("SUPPORT_DB_URL", filepath.Join(b.TempDir(), "stores.db")) // the fixture's stores
	p := startPlatform(b)
	dir := b.TempDir()
	_, commit := gittest.Init(b, dir, agenttest.Dir(b, "support-desk"))
	var walls []time.Duration
	for n := range b.N {
		agents := make([]string, 50)
		for i := range agents {
			agents[i] = p.gitAgent(b, fmt.Sprintf("desk-%d-%d", n, i), dir)
		}
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for _, id := range agents {
			wg.Go(func() { p.waitServing(b, p.push(b, id, dir, "main", commit)) })
		}
		wg.Wait()
		walls = append(walls, time.Since(start))
		b.StopTimer()
	}
	b.ReportMetric(float64(percentile(walls, 0.5).Milliseconds()), "wall-ms")
}

// BenchmarkSwitchLatency rolls production back and forth between two deployments 100 times
// (per b.N) while a client loops on the persistent URL. It reports the p99 latency of the
// switch call and how many requests that started after a switch's response returned were
// served by the wrong deployment (the target is zero).
func BenchmarkSwitchLatency(b *testing.B) {
	p := startPlatform(b)
	var a struct{ AgentID, Slug string }
	p.call(b, "POST", "/api/agents", map[string]any{"name": "switch"}, nil, &a)
	files := agenttest.Files(b, "hello")
	var deploys [2]string
	for i := range deploys {
		files["NOTES.md"] = fmt.Sprint("version ", i) // two different bundles
		var sv struct{ SourceVersionID string }
		if s := p.call(b, "POST", "/api/agents/"+a.AgentID+"/source-versions", map[string]any{"files": files}, nil, &sv); s != 201 {
			b.Fatalf("upload = %d", s)
		}
		var rd struct{ DeployID string }
		p.call(b, "POST", "/api/deployments/redeploy", map[string]any{"agentId": a.AgentID, "sourceVersionId": sv.SourceVersionID}, nil, &rd)
		for {
			var d struct{ Status string }
			p.call(b, "GET", "/api/deployments/"+rd.DeployID, nil, nil, &d)
			if d.Status == "ready" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		p.call(b, "POST", "/api/deployments/"+rd.DeployID+"/activate", nil, nil, nil)
		deploys[i] = rd.DeployID
	}
	var tok struct{ Token string }
	p.call(b, "POST", "/api/agents/"+a.AgentID+"/tokens", map[string]any{}, nil, &tok)

	type sample struct {
		start, end time.Time
		deployID   string
	}
	var mu sync.Mutex
	var samples []sample
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/health", nil)
			req.Host = a.Slug + ".apps.localhost"
			req.Header.Set("Authorization", "Bearer "+tok.Token)
			start := time.Now()
			resp, err := benchClient.Do(req)
			if err != nil {
				continue
			}
			var h struct{ DeployID string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			mu.Lock()
			samples = append(samples, sample{start, time.Now(), h.DeployID})
			mu.Unlock()
		}
	})
	type switchRec struct {
		done   time.Time
		target string
	}
	var switches []switchRec
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		for i := range 100 {
			target := deploys[i%2]
			start := time.Now()
			if s := p.call(b, "POST", "/api/deployments/rollback", map[string]any{"agentId": a.AgentID, "deployId": target}, nil, nil); s != 200 {
				b.Fatalf("rollback = %d", s)
			}
			done := time.Now()
			lat = append(lat, done.Sub(start))
			switches = append(switches, switchRec{done, target})
			time.Sleep(2 * time.Millisecond) // let the client see each state
		}
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	wrong, checked := 0, 0
	for _, s := range samples {
		// The newest switch whose response returned before this request started names the right
		// answer, unless the next switch began before the request ended (then either is right).
		idx := -1
		for i, sw := range switches {
			if sw.done.Before(s.start) {
				idx = i
			}
		}
		if idx < 0 || (idx+1 < len(switches) && switches[idx+1].done.Add(-lat[idx+1]).Before(s.end)) {
			continue
		}
		checked++
		if s.deployID != switches[idx].target {
			wrong++
		}
	}
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "switch-p99-ms")
	b.ReportMetric(float64(wrong), "wrong")
	b.ReportMetric(float64(checked), "checked")
}
