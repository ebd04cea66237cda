package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/builder/gittest"
	"svc/registry"
)

// The push of a git agent, end to end, over a git server that counts its fetches: issue 16's
// "the two processes fetch once" (TestPushFetchesOnceScaleOut) and its measurement of push →
// serving in scale-out next to svc up (TestPushServingScaleOutBench).

// gitServer is a smart-HTTP git server (gittest.HTTPServer) over the repositories under root that
// counts, per repository, the fetches that ask for a pack (isPackFetch).
type gitServer struct {
	root, url string

	mu      sync.Mutex
	fetches map[string]int // repository (first path segment) → pack fetches
}

func newGitServer(t *testing.T) *gitServer {
	t.Helper()
	g := &gitServer{root: t.TempDir(), fetches: map[string]int{}}
	srv := gittest.HTTPServer(t, g.root, func(backend http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isPackFetch(r) {
				repo, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
				g.mu.Lock()
				g.fetches[repo]++
				g.mu.Unlock()
			}
			backend.ServeHTTP(w, r)
		})
	})
	g.url = srv.URL
	return g
}

// Fetches is how many packs repo was asked for so far.
func (g *gitServer) Fetches(repo string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fetches[repo]
}

// pushAgent is an agent of a running platform (svc up, or the roles of a cluster) whose source
// is a repository of the flow agent (testdata/durable/flow) served by a gitServer, with
// autoDeploy and autoPromoteProduction on and a webhook secret.
type pushAgent struct {
	api    func() string // base URL of the platform API to call next
	agents func() string // base URL of the server of agents to ask next
	admin  string
	repo   *gittest.Repo
	name   string // the repository's name at the git server
	dir    string
	n      int

	id, slug, token, secret string
}

// newPushAgent creates the agent and its repository root/name, served at git.url/name.
func newPushAgent(t *testing.T, git *gitServer, name, admin string, api, agents func() string) *pushAgent {
	t.Helper()
	a := &pushAgent{api: api, agents: agents, admin: admin, name: name, dir: filepath.Join(git.root, name), secret: "hook-secret-" + name}
	a.repo, _ = gittest.Init(t, a.dir, filepath.Join("testdata", "durable", "flow"))
	var created struct{ AgentID, Slug string }
	if s := a.call(t, "POST", "/api/agents", map[string]any{"name": name}, nil, &created); s != 201 || created.AgentID == "" {
		t.Fatalf("create agent = %d %+v", s, created)
	}
	a.id, a.slug = created.AgentID, created.Slug
	if s := a.call(t, "PUT", "/api/agents/"+a.id+"/source", map[string]any{"type": "git", "url": git.url + "/" + name, "webhookSecret": a.secret}, nil, nil); s/100 != 2 {
		t.Fatalf("set source = %d", s)
	}
	if s := a.call(t, "PUT", "/api/agents/"+a.id+"/deploy-settings", map[string]any{"autoDeploy": true, "autoPromoteProduction": true}, nil, nil); s/100 != 2 {
		t.Fatalf("deploy settings = %d", s)
	}
	var tok struct{ Token string }
	if s := a.call(t, "POST", "/api/agents/"+a.id+"/tokens", map[string]any{"user_id": "ana", "ttl": 3600}, nil, &tok); s != 201 {
		t.Fatalf("mint token = %d", s)
	}
	a.token = tok.Token
	return a
}

// call calls the platform API with the admin token and decodes the answer into out.
func (a *pushAgent) call(t *testing.T, method, path string, body any, hdr map[string]string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, a.api()+path, requestBody(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.admin)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := benchClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: answer %d %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// commit makes a new commit on main and returns it.
func (a *pushAgent) commit(t *testing.T) string {
	t.Helper()
	a.n++
	if err := os.WriteFile(filepath.Join(a.dir, "NOTES.md"), []byte(fmt.Sprintf("change %d", a.n)), 0o644); err != nil {
		t.Fatal(err)
	}
	return a.repo.Commit(t, "", fmt.Sprintf("change %d", a.n))
}

// push delivers a signed GitHub push of commit to main and returns the deployment it started; it
// fails the test unless the push was accepted for a build.
func (a *pushAgent) push(t *testing.T, commit string) string {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": commit,
		"repository": map[string]any{"full_name": "acme/" + a.name, "clone_url": "https://git.example/acme/" + a.name},
		"pusher":     map[string]any{"name": "dev"}, "head_commit": map[string]any{"id": commit, "message": "m"},
	})
	mac := hmac.New(sha256.New, []byte(a.secret))
	mac.Write(payload)
	var out struct{ Action, DeployID string }
	s := a.call(t, "POST", "/webhooks/github?agent="+a.id, payload,
		map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))}, &out)
	if s != 202 || out.Action != "build" || out.DeployID == "" {
		t.Fatalf("push of %s = %d %+v", commit, s, out)
	}
	return out.DeployID
}

// waitServing polls the agent's persistent URL (GET /health, every poll) until it answers with
// deployID, and fails the test after within or when the deployment failed.
func (a *pushAgent) waitServing(t *testing.T, deployID string, poll, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for i := 0; ; i++ {
		req, err := http.NewRequestWithContext(t.Context(), "GET", a.agents()+"/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = a.slug + ".apps.localhost"
		req.Header.Set("Authorization", "Bearer "+a.token)
		if resp, err := benchClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && bytes.Contains(b, []byte(deployID)) {
				return
			}
		}
		if i%200 == 199 { // now and then, whether the build failed
			var d struct{ Status, Error string }
			a.call(t, "GET", "/api/deployments/"+deployID, nil, nil, &d)
			if d.Status == "failed" {
				t.Fatalf("deployment %s failed: %s", deployID, d.Error)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the persistent URL of %s did not serve deployment %s within %s", a.slug, deployID, within)
		}
		time.Sleep(poll)
	}
}

// TestPushServingScaleOutBench measures push → serving: from sending a signed push webhook of a
// new commit of main until the agent's persistent URL answers with the new deployment, for the
// roles as separate processes (startCluster: two api, two worker, two runner processes on
// Postgres, Redis and S3) and for svc up (one child process, SQLite, filesystem objects, the
// in-process queue), alternating, over one git server on HTTP. It runs only when
// SVC_BENCH_PUSH_SERVING is the number of pushes of each (CI does not pay for it):
//
//	SVC_BENCH_PUSH_SERVING=30 go test -run '^TestPushServingScaleOutBench$' -v ./cmd/svc
func TestPushServingScaleOutBench(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SVC_BENCH_PUSH_SERVING"))
	if n <= 0 {
		t.Skip("a measurement: set SVC_BENCH_PUSH_SERVING to the number of pushes of each setup")
	}
	git := newGitServer(t)
	c := startCluster(t, 3)
	up := startChild(t, t.TempDir())
	sides := []struct {
		name string
		a    *pushAgent
	}{
		{"scale-out", newPushAgent(t, git, "scaleout", c.admin, func() string { return c.next("api") }, func() string { return c.next("runner") })},
		{"svc up", newPushAgent(t, git, "up", up.token, func() string { return up.url }, func() string { return up.url })},
	}
	type figures struct {
		accepted, serving []time.Duration
		deploys           []string
		sent, seen        map[string]time.Time
	}
	got := make([]figures, len(sides))
	for i := range got {
		got[i].sent, got[i].seen = map[string]time.Time{}, map[string]time.Time{}
	}
	for _, s := range sides { // one push each first, not measured: runtimes and connections warm up
		s.a.waitServing(t, s.a.push(t, s.a.commit(t)), time.Millisecond, 2*time.Minute)
	}
	before := []int{git.Fetches(sides[0].a.name), git.Fetches(sides[1].a.name)}
	for range n {
		for i, s := range sides {
			commit := s.a.commit(t)
			sent := time.Now()
			deployID := s.a.push(t, commit)
			got[i].accepted = append(got[i].accepted, time.Since(sent))
			s.a.waitServing(t, deployID, time.Millisecond, 2*time.Minute)
			got[i].serving = append(got[i].serving, time.Since(sent))
			got[i].deploys = append(got[i].deploys, deployID)
			got[i].sent[deployID], got[i].seen[deployID] = sent, time.Now()
		}
	}
	// Where the time of the scale-out pushes goes, from the builds' rows: webhook (sent → 202),
	// queued (the build recorded → a worker started it), build (started → finished and
	// activated), served (finished → the runner answered with it).
	var builds []registry.Build
	if err := c.db.Where("deploy_id IN ?", got[0].deploys).Find(&builds).Error; err != nil {
		t.Fatal(err)
	}
	var queued, building, served []time.Duration
	for _, b := range builds {
		if b.StartedAt == nil || b.FinishedAt == nil {
			continue
		}
		queued = append(queued, b.StartedAt.Sub(b.CreatedAt))
		building = append(building, b.FinishedAt.Sub(*b.StartedAt))
		served = append(served, got[0].seen[b.DeployID].Sub(*b.FinishedAt))
	}
	if len(queued) > 0 {
		t.Logf("scale-out p50 (p99): webhook %v (%v), queued %v (%v), build %v (%v), finished -> served %v (%v)",
			percentile(got[0].accepted, 0.5).Round(100*time.Microsecond), percentile(got[0].accepted, 0.99).Round(100*time.Microsecond),
			percentile(queued, 0.5).Round(100*time.Microsecond), percentile(queued, 0.99).Round(100*time.Microsecond),
			percentile(building, 0.5).Round(100*time.Microsecond), percentile(building, 0.99).Round(100*time.Microsecond),
			percentile(served, 0.5).Round(100*time.Microsecond), percentile(served, 0.99).Round(100*time.Microsecond))
	}
	for i, s := range sides {
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
		t.Logf("%-9s push -> serving p50 %s, p99 %s, max %s; webhook answered p50 %s, p99 %s; %.2f pack fetches a push (%d pushes)",
			s.name, ms(percentile(got[i].serving, 0.5)), ms(percentile(got[i].serving, 0.99)), ms(percentile(got[i].serving, 1)),
			ms(percentile(got[i].accepted, 0.5)), ms(percentile(got[i].accepted, 0.99)),
			float64(git.Fetches(s.a.name)-before[i])/float64(n), n)
	}
}

// TestPushFetchesOnceScaleOut: with svc api and svc worker as separate processes, a push fetches
// its commit from the git server once: the webhook stores the tree it fetched for the ci.deploy
// check in the object store and the build, on a worker, reads it there, builds the bundle a
// fetching build builds, and deletes it. When the stored tree is gone before the build reads it,
// the build fetches the commit and says so in its log.
func TestPushFetchesOnceScaleOut(t *testing.T) {
	git := newGitServer(t)
	c := startCluster(t, 4)
	a := newPushAgent(t, git, "repo", c.admin, func() string { return c.next("api") }, func() string { return c.next("runner") })
	logs := registry.NewBuildLogs(c.db)
	logOf := func(deployID string) string {
		t.Helper()
		var d registry.Deployment
		if err := c.db.Where("id = ?", deployID).First(&d).Error; err != nil {
			t.Fatal(err)
		}
		lines, err := logs.After(t.Context(), d.BuildID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(l.Line + "\n")
		}
		return b.String()
	}

	// 1. A push: one fetch, the tree read from the object store, the object deleted after.
	commit := a.commit(t)
	fetches := git.Fetches("repo")
	pushed := a.push(t, commit)
	a.waitServing(t, pushed, 5*time.Millisecond, 2*time.Minute)
	key := registry.CommitSourceKey(a.id, commit)
	if n := git.Fetches("repo") - fetches; n != 1 {
		t.Errorf("a push fetched its commit %d times, want once", n)
	}
	if log := logOf(pushed); !strings.Contains(log, "that the push fetched and stored") {
		t.Errorf("the build did not read the stored tree; its log:\n%s", log)
	}
	if _, err := c.objects.Stat(t.Context(), key); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("the stored tree %s after its build: %v, want it deleted", key, err)
	}
	// The same commit built by a redeploy, which fetches it, gives the same bundle.
	var rd struct{ DeployID string }
	if s := a.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": a.id, "branch": "main", "environment": "preview-fetched"}, nil, &rd); s/100 != 2 {
		t.Fatalf("redeploy = %d", s)
	}
	settled := c.waitSettled([]string{pushed, rd.DeployID}, 2*time.Minute)
	if p, f := settled[pushed], settled[rd.DeployID]; f.Status != registry.StatusReady || f.Commit != p.Commit {
		t.Fatalf("fetched build %+v of the pushed %+v", f, p)
	}
	var ds []registry.Deployment
	if err := c.db.Where("id IN ?", []string{pushed, rd.DeployID}).Find(&ds).Error; err != nil || len(ds) != 2 {
		t.Fatalf("deployments: %v", err)
	}
	if ds[0].Digest != ds[1].Digest || ds[0].BundleKey != ds[1].BundleKey {
		t.Errorf("bundles of the stored tree and of the fetched commit differ: %s %s, %s %s", ds[0].BundleKey, ds[0].Digest, ds[1].BundleKey, ds[1].Digest)
	}

	// 2. The stored tree deleted before any worker reads it: the build fetches the commit.
	c.proc("worker1").Kill()
	c.proc("worker2").Kill()
	commit = a.commit(t)
	fetches = git.Fetches("repo")
	pushed = a.push(t, commit)
	key = registry.CommitSourceKey(a.id, commit)
	if _, err := c.objects.Stat(t.Context(), key); err != nil {
		t.Fatalf("the push stored no tree at %s: %v", key, err)
	}
	if err := c.objects.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	c.proc("worker1").Start("")
	c.proc("worker2").Start("")
	a.waitServing(t, pushed, 5*time.Millisecond, 2*time.Minute)
	if n := git.Fetches("repo") - fetches; n != 2 {
		t.Errorf("a push whose stored tree was lost fetched its commit %d times, want twice (the webhook, the build)", n)
	}
	if log := logOf(pushed); !strings.Contains(log, "the tree the push stored cannot be read") || !strings.Contains(log, "fetched commit") {
		t.Errorf("the build's log does not say it fetched instead:\n%s", log)
	}
	c.checkDigests()
}
