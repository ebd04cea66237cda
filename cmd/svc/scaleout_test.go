package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/agent/agenttest"
	"svc/builder/gittest"
	"svc/migrations/dbtest"
	"svc/registry/s3objects/s3test"
)

// freeAddr returns a loopback address with a port free now, for a child process to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		// A child that binds its address late (a worker is not waited for) must not find it
		// handed to a second child meanwhile: each address is handed out once per test binary.
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
}

// handedOut holds every address freeAddr returned.
var handedOut sync.Map

// scaleOutFlags gives the roles of a scale-out test their services: a fresh Postgres database,
// Redis database db of its own (emptied first) and the test S3 server; it returns the flags every
// role takes (admin is the bootstrap admin token), the database's URL and a client of the Redis
// database, closed when t ends.
func scaleOutFlags(t *testing.T, db int, admin string) (common []string, dbURL string, rdb *redis.Client) {
	t.Helper()
	rdb, redisURL := redisDatabase(t, db)
	s3 := s3test.Start(t)
	dbURL = dbtest.PostgresURL(t)
	return []string{
		"--database-url", dbURL, "--redis-url", redisURL,
		"--s3-endpoint", s3.Endpoint, "--s3-bucket", s3.Bucket, "--s3-access-key", s3.AccessKey, "--s3-secret-key", s3.SecretKey,
		"--signing-key", strings.Repeat("ab", 32), "--secret-key", strings.Repeat("cd", 32),
		"--bootstrap-admin-token", admin, "--log-format", "json", "--log-level", "warn", "--data-dir", t.TempDir(),
	}, dbURL, rdb
}

// roleFlags keeps of flags (pairs "--name value") those of the settings r reads: scaleOutFlags
// are the settings of every role, as compose.yaml's shared environment is.
func roleFlags(r role, flags []string) []string {
	read := map[string]bool{}
	for _, s := range settings() {
		read["--"+s.flag] = s.roles&r != 0
	}
	var out []string
	for i := 0; i+1 < len(flags); i += 2 {
		if read[flags[i]] {
			out = append(out, flags[i], flags[i+1])
		}
	}
	return out
}

// redisDatabase claims Redis database db of the test server for t, empties it and returns a
// client of it, closed when t ends, and its URL. Each test that runs roles has a database of its
// own. The claim, a key in database 0 renewed while t runs, makes a test of another checkout on
// the same machine that wants the same database wait for this one rather than empty it under it.
func redisDatabase(t *testing.T, db int) (*redis.Client, string) {
	t.Helper()
	base := os.Getenv("SVC_TEST_REDIS_URL")
	if base == "" {
		base = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(base)
	if err != nil {
		t.Fatal(err)
	}
	claimRedisDatabase(t, *opt, db)
	opt.DB = db
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() }) // a failed close leaves nothing to undo
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		dbtest.Missing(t, "Redis at "+opt.Addr, err)
	}
	return rdb, fmt.Sprintf("redis://%s/%d", opt.Addr, db)
}

// claimRedisDatabase holds database db for t: it waits (up to 10 minutes) while another test
// run holds it, then keeps the claim alive until t's cleanups end. A killed test run's claim
// lapses within 30 s.
func claimRedisDatabase(t *testing.T, opt redis.Options, db int) {
	t.Helper()
	const ttl = 30 * time.Second
	opt.DB = 0
	c := redis.NewClient(&opt)
	key := fmt.Sprintf("svc-test:claim:redis-db:%d", db)
	owner := fmt.Sprintf("pid %d, %s", os.Getpid(), t.Name())
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Minute); ; {
		ok, err := c.SetNX(ctx, key, owner, ttl).Result()
		if err != nil {
			_ = c.Close()
			dbtest.Missing(t, "Redis at "+opt.Addr, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			holder := c.Get(ctx, key).Val()
			_ = c.Close()
			t.Fatalf("Redis database %d is still claimed by another test run (key %s in database 0: %s)", db, key, holder)
		}
		time.Sleep(250 * time.Millisecond)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				c.Expire(ctx, key, ttl)
			}
		}
	}()
	t.Cleanup(func() { // registered first, so it runs after the roles' cleanups
		close(stop)
		<-done
		if c.Get(ctx, key).Val() == owner {
			c.Del(ctx, key)
		}
		_ = c.Close()
	})
}

// TestRedisDatabaseClaim: two tests that want the same Redis database hold it one after the
// other, and neither empties it under the other.
func TestRedisDatabaseClaim(t *testing.T) {
	const db = 5
	var mu sync.Mutex
	var spans [][2]time.Time
	t.Run("group", func(t *testing.T) {
		for _, name := range []string{"first", "second"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				rdb, _ := redisDatabase(t, db)
				from := time.Now()
				if err := rdb.Set(t.Context(), "holder", name, 0).Err(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond)
				if got := rdb.Get(t.Context(), "holder").Val(); got != name {
					t.Errorf("the database was emptied or taken while %s held it (holder %q)", name, got)
				}
				t.Cleanup(func() { // runs before the claim's own cleanup releases it
					mu.Lock()
					spans = append(spans, [2]time.Time{from, time.Now()})
					mu.Unlock()
				})
			})
		}
	})
	if len(spans) != 2 {
		t.Fatalf("%d holds recorded", len(spans))
	}
	a, b := spans[0], spans[1]
	if a[0].Before(b[1]) && b[0].Before(a[1]) {
		t.Errorf("the two holds overlap: %v and %v", a, b)
	}
}

// TestScaleOut runs the three roles as separate servers on Postgres, Redis (asynq) and a real
// S3 server: a signed push of the support-desk fixture builds on the worker, serves on the
// runner, and production follows autoPromoteProduction.
func TestScaleOut(t *testing.T) {
	const admin = "pk_scaleout_admin_token_0123456789"
	common, dbURL, _ := scaleOutFlags(t, 7, admin)
	apiAddr, runnerAddr, workerMetrics := freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, args := range [][]string{
		append([]string{"migrate"}, "--database-url", dbURL),
	} {
		if out, err := execute(ctx, args...); err != nil {
			t.Fatalf("svc %s: %v\n%s", args[0], err, out)
		}
	}
	for _, args := range [][]string{
		append([]string{"api", "--addr", apiAddr}, roleFlags(forAPI, common)...),
		append([]string{"worker", "--metrics-addr", workerMetrics}, roleFlags(forWorker, common)...),
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
	waitHealthy(t, "http://"+workerMetrics+"/health")
	p := &benchPlatform{url: "http://" + apiAddr, token: admin}

	// A real repository with the support-desk fixture, and a feature branch. Its stores live in
	// the SQLite database its svc.json names through SUPPORT_DB_URL.
	t.Setenv("SUPPORT_DB_URL", filepath.Join(t.TempDir(), "stores.db"))
	dir := t.TempDir()
	repo, mainCommit := gittest.Init(t, dir, agenttest.Dir(t, "support-desk"))
	repo.Branch(t, "feature/x")
	if err := os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	featureCommit := repo.Commit(t, "", "feature")
	var a struct{ AgentID, Slug string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": "Support Desk"}, nil, &a)
	const secret = "hook-secret"
	p.call(t, "PUT", "/api/agents/"+a.AgentID+"/source", map[string]any{"type": "git", "url": "file://" + dir, "webhookSecret": secret}, nil, nil)
	p.call(t, "PUT", "/api/agents/"+a.AgentID+"/deploy-settings", map[string]any{"autoDeploy": true}, nil, nil)

	push := func(branch, commit string) (int, map[string]any) {
		payload, _ := json.Marshal(map[string]any{
			"ref": "refs/heads/" + branch, "before": strings.Repeat("0", 40), "after": commit,
			"repository": map[string]any{"full_name": "acme/desk", "clone_url": "file://" + dir},
			"pusher":     map[string]any{"name": "dev"}, "head_commit": map[string]any{"id": commit, "message": "m"},
		})
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(payload)
		var out map[string]any
		status := p.call(t, "POST", "/webhooks/github?agent="+a.AgentID, payload,
			map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))}, &out)
		return status, out
	}
	deployment := func(id string) map[string]any {
		var d map[string]any
		p.call(t, "GET", "/api/deployments/"+id, nil, nil, &d)
		return d
	}
	wait := func(id string) map[string]any {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			d := deployment(id)
			if d["status"] == "ready" || d["status"] == "failed" {
				return d
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("deployment %s never finished", id)
		return nil
	}

	// 1. Preview: a push to feature/x builds preview-feature/x and activates it.
	status, out := push("feature/x", featureCommit)
	if status != 202 || out["action"] != "build" || out["environment"] != "preview-feature/x" {
		t.Fatalf("feature push = %d %v", status, out)
	}
	if d := wait(out["deployId"].(string)); d["isActive"] != true || d["commit"] != featureCommit {
		t.Fatalf("preview deployment = %v", d)
	}
	previewID := out["deployId"].(string)
	// The worker, which has no HTTP side of its own, serves its metrics on --metrics-addr. It
	// counts the build once the build's task returns, which can be just after the deployment
	// reads ready.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := scrapeCounters(t, "http://"+workerMetrics+"/metrics")
		if m["svc_builds_total"] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the worker's svc_builds_total = %v after a build; want at least 1", m["svc_builds_total"])
			break
		}
	}

	// 2. Production without autoPromoteProduction: ready, not active; the persistent URL has nothing.
	status, out = push("main", mainCommit)
	if status != 202 || out["environment"] != "production" {
		t.Fatalf("main push = %d %v", status, out)
	}
	prod := wait(out["deployId"].(string))
	if prod["status"] != "ready" || prod["isActive"] != false {
		t.Fatalf("production without autoPromote = %v", prod)
	}
	var tok struct{ Token string }
	p.call(t, "POST", "/api/agents/"+a.AgentID+"/tokens", map[string]any{"ttl": 600}, nil, &tok)
	health := func(host string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+runnerAddr+"/health", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if s, body := health(a.Slug + ".apps.localhost"); s != 503 || !strings.Contains(body, "NO_ACTIVE_DEPLOYMENT") {
		t.Fatalf("persistent URL before activation = %d %s", s, body)
	}
	if s, body := health(previewID + "--" + a.Slug + ".apps.localhost"); s != 200 || !strings.Contains(body, previewID) {
		t.Fatalf("pinned preview URL = %d %s", s, body)
	}

	// 3. With autoPromoteProduction, the next production build serves at the persistent URL.
	p.call(t, "PUT", "/api/agents/"+a.AgentID+"/deploy-settings", map[string]any{"autoPromoteProduction": true}, nil, nil)
	repo.Branch(t, "main")
	if err := os.WriteFile(filepath.Join(dir, "NOTES.md"), []byte("release"), 0o644); err != nil {
		t.Fatal(err)
	}
	release := repo.Commit(t, "", "release")
	status, out = push("main", release)
	if status != 202 || out["action"] != "build" {
		t.Fatalf("release push = %d %v", status, out)
	}
	live := wait(out["deployId"].(string))
	if live["isActive"] != true {
		t.Fatalf("production with autoPromote = %v", live)
	}
	if s, body := health(a.Slug + ".apps.localhost"); s != 200 || !strings.Contains(body, live["deployId"].(string)) {
		t.Fatalf("persistent URL = %d %s, want %s", s, body, live["deployId"])
	}
	// The bundle is in S3.
	var snap map[string]any
	if s := p.call(t, "GET", "/api/deployments/"+live["deployId"].(string)+"/snapshot", nil, nil, &snap); s != 200 || fmt.Sprint(snap["config"]) == "" {
		t.Fatalf("snapshot = %d %v", s, snap)
	}
	if strings.Contains(fmt.Sprint(snap), "hook-secret") {
		t.Fatal("the snapshot shows a secret")
	}

	// 4. An activation through the API process reaches the runner, which kept the live
	// deployment of the persistent URL in memory: through the events bus at once, within its
	// HostTTL (1 s) if that message were lost; never the old deployment for good.
	earlier := prod["deployId"].(string)
	if s := p.call(t, "POST", "/api/deployments/"+earlier+"/activate", nil, nil, nil); s != 200 {
		t.Fatalf("activate %s = %d", earlier, s)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s, body := health(a.Slug + ".apps.localhost")
		if s == 200 && strings.Contains(body, earlier) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("persistent URL after activating %s through the API = %d %s", earlier, s, body)
		}
	}
}
