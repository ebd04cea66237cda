package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/builder/gittest"
	"svc/bundle"
	"svc/faults"
	"svc/migrations"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/registry/s3objects"
	"svc/registry/s3objects/s3test"
)

// The fault harness of issue 16: the roles of svc as separate processes (children of the test
// binary, TestMain's envChildArgs) on Postgres, Redis and the S3 server of the test setup, that
// a test kills with SIGKILL, starts again, or starts with SVC_FAULT so that they die at a named
// point (package faults). compose.yaml starts the same roles with the same settings
// (TestComposeMatchesHarness).

// harnessRoles is what a cluster starts: two processes of each role.
var harnessRoles = []struct {
	role string
	n    int
}{{"api", 2}, {"worker", 2}, {"runner", 2}}

// roleArgs is the command line of a role: the role, and the listen address of those that serve.
func roleArgs(role, addr string) []string {
	if role == "worker" {
		return []string{"worker", "--metrics-addr", addr} // a worker listens only for /metrics and /health
	}
	return []string{role, "--addr", addr}
}

// withParam is the URL raw with the query parameter name=value added.
func withParam(raw, name, value string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// clusterSettings are the settings (environment variables) every role of a cluster gets, as
// compose.yaml's x-svc environment gives them.
func clusterSettings(dbURL, redisURL string, s3 s3objects.Config, admin string) map[string]string {
	return map[string]string{
		"DATABASE_URL": withParam(dbURL, "pool_max_conns", "10"), "REDIS_URL": redisURL, // 6 processes within max_connections (100), beside other tests
		"SVC_S3_ENDPOINT": s3.Endpoint, "SVC_S3_BUCKET": s3.Bucket, "SVC_S3_ACCESS_KEY": s3.AccessKey, "SVC_S3_SECRET_KEY": s3.SecretKey,
		"SVC_S3_USE_SSL": "false", "SVC_BOOTSTRAP_ADMIN_TOKEN": admin,
		"SVC_SIGNING_KEY": strings.Repeat("ab", 32), "SVC_SECRET_KEY": strings.Repeat("cd", 32),
		"SVC_APPS_DOMAIN": "apps.localhost", "SVC_LOG_FORMAT": "json",
	}
}

// cluster is a running set of role processes.
type cluster struct {
	t        *testing.T
	admin    string
	dbURL    string
	s3       s3objects.Config
	settings map[string]string
	dir      string // the children's working directory and logs
	db       *gorm.DB
	objects  registry.Objects

	mu    sync.Mutex
	procs []*proc
	rr    atomic.Uint64
}

// proc is one role process; Kill and Start replace its child, keeping its name and address.
type proc struct {
	c     *cluster
	name  string // api1, worker2...
	role  string
	addr  string // "" for a worker
	fault string // SVC_FAULT of the running child

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once the running child was waited for
	log  string
	runs int
}

// startCluster starts two api, two worker and two runner processes on a fresh Postgres
// database, Redis database redisDB (emptied first; each test its own) and the S3 server.
func startCluster(t *testing.T, redisDB int) *cluster {
	t.Helper()
	_, redisURL := redisDatabase(t, redisDB)
	c := &cluster{t: t, admin: "pk_fault_harness_admin_token_0123456789", s3: s3test.Start(t), dbURL: dbtest.PostgresURL(t), dir: t.TempDir()}
	c.settings = clusterSettings(c.dbURL, redisURL, c.s3, c.admin)
	if out, err := execute(t.Context(), "migrate", "--database-url", c.dbURL); err != nil {
		t.Fatalf("svc migrate: %v\n%s", err, out)
	}
	var err error
	if c.db, err = migrations.Open(t.Context(), c.dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := c.db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	if c.objects, err = s3objects.New(t.Context(), c.s3); err != nil {
		t.Fatal(err)
	}
	// Every child is killed and waited for, and its log shown when the test failed.
	t.Cleanup(func() {
		c.mu.Lock()
		procs := slices.Clone(c.procs)
		c.mu.Unlock()
		for _, p := range procs {
			p.Kill()
		}
		if t.Failed() {
			for _, p := range procs {
				p.showLogs()
			}
		}
	})
	started := time.Now()
	for _, r := range harnessRoles {
		for i := 1; i <= r.n; i++ {
			p := &proc{c: c, name: fmt.Sprintf("%s%d", r.role, i), role: r.role, addr: freeAddr(t)}
			c.procs = append(c.procs, p)
			p.Start("")
		}
	}
	t.Logf("cluster of %d processes serving in %s", len(c.procs), time.Since(started).Round(time.Millisecond))
	return c
}

// proc returns the process named name.
func (c *cluster) proc(name string) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	c.t.Fatalf("no process %s", name)
	return nil
}

// next is the front: the base URL of the next live process of role, round robin.
func (c *cluster) next(role string) string {
	c.mu.Lock()
	var live []*proc
	for _, p := range c.procs {
		if p.role == role && p.Alive() {
			live = append(live, p)
		}
	}
	c.mu.Unlock()
	if len(live) == 0 {
		return "http://127.0.0.1:1" // none: the call fails as a dead address does
	}
	return "http://" + live[c.rr.Add(1)%uint64(len(live))].addr
}

// Start runs a fresh child of the process's role at its address, armed with SVC_FAULT=fault
// when fault is not empty, and returns once it serves (a worker: once it started).
func (p *proc) Start(fault string) {
	t := p.c.t
	t.Helper()
	p.mu.Lock()
	args, _ := json.Marshal(roleArgs(p.role, p.addr))
	p.runs++
	logFile, err := os.Create(filepath.Join(p.c.dir, fmt.Sprintf("%s-%d.log", p.name, p.runs)))
	if err != nil {
		p.mu.Unlock()
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Dir = p.c.dir
	cmd.Env = childEnv(p.c.settings, fault)
	cmd.Env = append(cmd.Env, envChildArgs+"="+string(args))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		logFile.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.log, p.fault = cmd, done, logFile.Name(), fault
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait() // a killed child's error is expected
		logFile.Close()
		close(done)
	}()
	if p.role == "worker" {
		// A worker armed at a build's point may take a queued build and die before its
		// /health answers: it counts as started at once, as before it had an address.
		return
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-done:
			b, _ := os.ReadFile(p.log)
			t.Fatalf("%s exited before serving:\n%s", p.name, b)
		default:
		}
		if resp, err := http.Get("http://" + p.addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not serve within a minute", p.name)
		}
	}
}

// childEnv is the test's environment without any svc setting, plus settings and SVC_FAULT.
func childEnv(settings map[string]string, fault string) []string {
	drop := map[string]bool{faults.Env: true}
	for _, s := range settingsList() {
		drop[s] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] && !strings.HasPrefix(name, "SVC_TEST_CHILD") && !contains(svcEnv, name) {
			env = append(env, kv)
		}
	}
	for k, v := range settings {
		env = append(env, k+"="+v)
	}
	if fault != "" {
		env = append(env, faults.Env+"="+fault)
	}
	return env
}

// settingsList names the environment variable of every setting of the binary.
func settingsList() []string {
	var out []string
	for _, s := range settings() {
		out = append(out, s.env)
	}
	return out
}

// Alive reports whether the running child has not ended.
func (p *proc) Alive() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill ends the running child with SIGKILL and waits for it; a child that ended already is left.
func (p *proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL) // fails only when it already ended
	<-done
}

// Restart kills the child and starts a fresh one, armed with fault when not empty.
func (p *proc) Restart(fault string) {
	p.Kill()
	p.Start(fault)
}

// WaitDied waits (a generous deadline) for a child armed with a fault to die at its point, and
// reports that it died of SIGKILL.
func (p *proc) WaitDied(within time.Duration) {
	t := p.c.t
	t.Helper()
	p.mu.Lock()
	cmd, done, fault := p.cmd, p.done, p.fault
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("%s (SVC_FAULT=%s) did not die within %s", p.name, fault, within)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s (SVC_FAULT=%s) ended with %v, want SIGKILL at the fault point", p.name, fault, cmd.ProcessState)
	}
}

func (p *proc) showLogs() {
	for i := 1; i <= p.runs; i++ {
		b, _ := os.ReadFile(filepath.Join(p.c.dir, fmt.Sprintf("%s-%d.log", p.name, i)))
		if len(b) > 8000 {
			b = append([]byte("...\n"), b[len(b)-8000:]...)
		}
		p.c.t.Logf("log of %s, run %d:\n%s", p.name, i, b)
	}
}

// do calls the platform API through the front (the next api process) with the admin token.
func (c *cluster) do(ctx context.Context, method, path string, body any, hdr map[string]string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.next("api")+path, requestBody(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.admin)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("answer %d %q: %w", resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, nil
}

// call is do that fails the test on a transport error.
func (c *cluster) call(method, path string, body any, out any) int {
	c.t.Helper()
	s, err := c.do(c.t.Context(), method, path, body, nil, out)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return s
}

// gitAgent is an agent of the cluster whose source is a git repository of the flow agent
// (testdata/durable/flow), with autoDeploy and autoPromoteProduction on.
type gitAgent struct {
	*flowAgent
	c      *cluster
	repo   *gittest.Repo
	dir    string
	secret string
	first  string // the first commit, on main
	n      int
}

func (c *cluster) gitAgent(name string) *gitAgent {
	t := c.t
	t.Helper()
	g := &gitAgent{flowAgent: &flowAgent{}, c: c, dir: t.TempDir(), secret: "hook-secret-" + name}
	g.repo, g.first = gittest.Init(t, g.dir, filepath.Join("testdata", "durable", "flow"))
	if s := c.call("POST", "/api/agents", map[string]any{"name": name}, g.flowAgent); s != 201 || g.AgentID == "" {
		t.Fatalf("create agent = %d %+v", s, g.flowAgent)
	}
	if s := c.call("PUT", "/api/agents/"+g.AgentID+"/source", map[string]any{"type": "git", "url": "file://" + g.dir, "webhookSecret": g.secret}, nil); s/100 != 2 {
		t.Fatalf("set source = %d", s)
	}
	if s := c.call("PUT", "/api/agents/"+g.AgentID+"/deploy-settings", map[string]any{"autoDeploy": true, "autoPromoteProduction": true}, nil); s/100 != 2 {
		t.Fatalf("deploy settings = %d", s)
	}
	var tok struct{ Token string }
	if s := c.call("POST", "/api/agents/"+g.AgentID+"/tokens", map[string]any{"user_id": "ana", "ttl": 3600}, &tok); s != 201 {
		t.Fatalf("mint token = %d", s)
	}
	g.token = tok.Token
	return g
}

// commit makes a new commit on branch and returns it.
func (g *gitAgent) commit(branch string) string {
	g.c.t.Helper()
	g.repo.Branch(g.c.t, branch)
	g.n++
	if err := os.WriteFile(filepath.Join(g.dir, "NOTES.md"), []byte(fmt.Sprintf("change %d", g.n)), 0o644); err != nil {
		g.c.t.Fatal(err)
	}
	return g.repo.Commit(g.c.t, "", fmt.Sprintf("change %d", g.n))
}

// push delivers a signed GitHub push of commit on branch through the front and returns the
// deployment it started; it fails the test unless the push was accepted for a build.
func (g *gitAgent) push(branch, commit string) string {
	t := g.c.t
	t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/" + branch, "before": strings.Repeat("0", 40), "after": commit,
		"repository": map[string]any{"full_name": "acme/flow", "clone_url": "file://" + g.dir},
		"pusher":     map[string]any{"name": "dev"}, "head_commit": map[string]any{"id": commit, "message": "m"},
	})
	mac := hmac.New(sha256.New, []byte(g.secret))
	mac.Write(payload)
	var out struct{ Action, DeployID, Environment string }
	s, err := g.c.do(t.Context(), "POST", "/webhooks/github?agent="+g.AgentID, payload,
		map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))}, &out)
	if err != nil || s != 202 || out.Action != "build" || out.DeployID == "" {
		t.Fatalf("push of %s to %s = %d %+v, %v", commit, branch, s, out, err)
	}
	return out.DeployID
}

// deployment is a deployment as the API shows it.
type deploymentView struct {
	DeployID, Status, Error, Environment, Commit string
	IsActive                                     bool
}

// waitSettled waits until each deployment of ids is ready or failed, and fails the test for one
// still queued or building after within (a generous deadline: asynq takes a killed worker's task
// back only once its lease expired). It returns the deployments.
func (c *cluster) waitSettled(ids []string, within time.Duration) map[string]deploymentView {
	t := c.t
	t.Helper()
	start := time.Now()
	out := map[string]deploymentView{}
	for _, id := range ids {
		for {
			var d deploymentView
			s, err := c.do(t.Context(), "GET", "/api/deployments/"+id, nil, nil, &d)
			if err == nil && s == 200 && (d.Status == registry.StatusReady || d.Status == registry.StatusFailed) {
				out[id] = d
				break
			}
			if time.Since(start) > within {
				t.Fatalf("invariant: deployment %s is %q (%d, %v) %s after the fault; want ready or failed", id, d.Status, s, err, within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("%d deployments settled %s after the wait began", len(ids), time.Since(start).Round(100*time.Millisecond))
	return out
}

// checkInvariants checks, after a fault scenario, over the API and the database: every
// accepted push (deployment of accepted) ends ready or failed with a reason; no build is left
// queued or running; never two builds of one commit for one environment; at most one active
// deployment per environment, and exactly one in each of wantActive ("agentID/environment");
// every stored bundle's digest matches its content. It returns the settled deployments.
func (c *cluster) checkInvariants(accepted []string, wantActive ...string) map[string]deploymentView {
	t := c.t
	t.Helper()
	settled := c.waitSettled(accepted, 3*time.Minute)
	for id, d := range settled {
		if d.Status == registry.StatusFailed && strings.TrimSpace(d.Error) == "" {
			t.Errorf("invariant: deployment %s failed without a reason", id)
		}
	}
	ctx := t.Context()
	var stuck []registry.Build
	if err := c.db.WithContext(ctx).Where("status IN ?", []string{registry.BuildQueued, registry.BuildRunning}).Find(&stuck).Error; err != nil {
		t.Fatal(err)
	}
	for _, b := range stuck {
		t.Errorf("invariant: build %s of deployment %s is still %s", b.ID, b.DeployID, b.Status)
	}
	var twice []struct {
		AgentID, Environment, CommitSHA string
		N                               int
	}
	if err := c.db.WithContext(ctx).Table("builds").Select("agent_id, environment, commit_sha, count(*) AS n").
		Where("commit_sha <> '' AND trigger <> 'promote'").Group("agent_id, environment, commit_sha").Having("count(*) > 1").Scan(&twice).Error; err != nil {
		t.Fatal(err)
	}
	for _, d := range twice {
		t.Errorf("invariant: %d builds of commit %s for %s of agent %s", d.N, d.CommitSHA, d.Environment, d.AgentID)
	}
	var active []struct {
		AgentID, Environment string
		N                    int
	}
	if err := c.db.WithContext(ctx).Table("deployments").Select("agent_id, environment, count(*) AS n").
		Where("is_active").Group("agent_id, environment").Scan(&active).Error; err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range active {
		seen[a.AgentID+"/"+a.Environment] = a.N
		if a.N != 1 {
			t.Errorf("invariant: %d active deployments in %s of agent %s", a.N, a.Environment, a.AgentID)
		}
	}
	for _, env := range wantActive {
		if seen[env] != 1 {
			t.Errorf("invariant: %d active deployments in %s, want exactly one", seen[env], env)
		}
	}
	c.checkDigests()
	return settled
}

// checkDigests reads every ready deployment's bundle from S3 and hashes it as package bundle does.
func (c *cluster) checkDigests() {
	t := c.t
	t.Helper()
	var ds []registry.Deployment
	if err := c.db.WithContext(t.Context()).Where("status = ? AND bundle_key <> ''", registry.StatusReady).Find(&ds).Error; err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, d := range ds {
		if checked[d.BundleKey+" "+d.Digest] {
			continue
		}
		checked[d.BundleKey+" "+d.Digest] = true
		rc, _, err := c.objects.Get(t.Context(), d.BundleKey)
		if err != nil {
			t.Errorf("invariant: bundle %s of deployment %s: %v", d.BundleKey, d.ID, err)
			continue
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Errorf("invariant: read bundle %s: %v", d.BundleKey, err)
			continue
		}
		if got := bundle.DigestOf(b); got != d.Digest {
			t.Errorf("invariant: bundle %s of deployment %s hashes to %s, recorded %s", d.BundleKey, d.ID, got, d.Digest)
		}
	}
	if len(ds) == 0 {
		t.Errorf("invariant: no ready deployment to check the digest of")
	}
	t.Logf("checked the digests of %d stored bundles (%d ready deployments)", len(checked), len(ds))
}
