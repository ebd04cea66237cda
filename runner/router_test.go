package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner"
	"svc/runner/stores"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		host string
		want runner.Target
		ok   bool
	}{
		{"acme.apps.localhost", runner.Target{Slug: "acme"}, true},
		{"acme.apps.localhost:8080", runner.Target{Slug: "acme"}, true},
		{"ACME.Apps.Localhost.", runner.Target{Slug: "acme"}, true},
		{"dabc--acme.apps.localhost", runner.Target{Slug: "acme", DeployID: "dabc"}, true},
		{"--acme.apps.localhost", runner.Target{}, false},
		{"dabc--.apps.localhost", runner.Target{}, false},
		{"apps.localhost", runner.Target{}, false},
		{"a.b.apps.localhost", runner.Target{}, false},
		{"127.0.0.1:8080", runner.Target{}, false},
		{"acme.apps.localhost.evil.com", runner.Target{}, false},
	}
	for _, tt := range tests {
		got, ok := runner.ParseHost(tt.host, "apps.localhost")
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseHost(%q) = %+v, %v; want %+v, %v", tt.host, got, ok, tt.want, tt.ok)
		}
	}
}

// healthRuntime answers /health with the deployment it serves, like the real runtime does.
type healthRuntime struct {
	id     string
	closed *atomic.Int32
}

func (h healthRuntime) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok", "deployId": h.id})
}

func (h healthRuntime) Close(context.Context) error { h.closed.Add(1); return nil }

func TestRouterFollowsActivation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		deps := registry.NewDeployments(db)
		build := acmeBuilds(t, db, deps)
		now := time.Now().UTC()
		if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a2','idle','Idle',?,?)`, now, now).Error; err != nil {
			t.Fatal(err)
		}
		var loads, closed atomic.Int32
		router, err := runner.NewRouter(runner.Config{
			Resolver: deps, AppsDomain: "apps.localhost",
			LoadBundle: func(context.Context, registry.Deployment) (*agent.Agent, error) {
				loads.Add(1)
				return &agent.Agent{}, nil
			},
			NewRuntime: func(_ context.Context, _ *agent.Agent, d registry.Deployment) (runner.Runtime, error) {
				return healthRuntime{id: d.ID, closed: &closed}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(router)
		defer srv.Close()
		defer router.Close()

		get := func(host string) (int, string) {
			req, _ := http.NewRequest("GET", srv.URL+"/health", nil)
			req.Host = host
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var body struct {
				DeployID string `json:"deployId"`
				Error    struct{ Code string }
			}
			_ = json.Unmarshal(b, &body)
			if body.DeployID != "" {
				return resp.StatusCode, body.DeployID
			}
			return resp.StatusCode, body.Error.Code
		}
		check := func(host string, wantStatus int, want string) {
			t.Helper()
			if status, got := get(host); status != wantStatus || got != want {
				t.Errorf("GET %s/health = %d %s, want %d %s", host, status, got, wantStatus, want)
			}
		}
		check("nobody.apps.localhost", 404, "NOT_FOUND")
		check("idle.apps.localhost", 503, "NO_ACTIVE_DEPLOYMENT")
		d1 := build("production", "c1", false)
		check("acme.apps.localhost", 503, "NO_ACTIVE_DEPLOYMENT")
		check(d1.ID+"--acme.apps.localhost", 200, d1.ID)
		check(d1.ID+"--idle.apps.localhost", 404, "NOT_FOUND")
		check("dnothing--acme.apps.localhost", 404, "NOT_FOUND")
		if _, err := deps.Activate(ctx, d1.ID, "op"); err != nil {
			t.Fatal(err)
		}
		check("acme.apps.localhost:8080", 200, d1.ID)
		d2 := build("production", "c2", true)
		check("acme.apps.localhost", 200, d2.ID)
		if _, err := deps.Rollback(ctx, "a1", "production", "", "op"); err != nil {
			t.Fatal(err)
		}
		check("acme.apps.localhost", 200, d1.ID)
		check(d2.ID+"--acme.apps.localhost", 200, d2.ID)
		// A preview deployment never serves the persistent name.
		p := build("preview-x", "c3", true)
		check("acme.apps.localhost", 200, d1.ID)
		check(p.ID+"--acme.apps.localhost", 200, p.ID)
		// A stopped runtime answers 503 on its URLs.
		if _, err := deps.SetRuntimeStopped(ctx, d1.ID, true); err != nil {
			t.Fatal(err)
		}
		check("acme.apps.localhost", 503, "RUNTIME_STOPPED")
		check(d1.ID+"--acme.apps.localhost", 503, "RUNTIME_STOPPED")
		if got := loads.Load(); got != 3 {
			t.Errorf("bundle loads = %d, want 3 (one per digest)", got)
		}
		router.Close()
		if got := closed.Load(); got != 3 {
			t.Errorf("runtimes closed = %d, want 3", got)
		}
	})
}

// TestRouterRecordsFailedLoads: a bundle that does not load answers 503 RUNTIME_UNAVAILABLE, is
// read again only after RetryAfter, and its reason is recorded on the deployment until a load
// succeeds.
func TestRouterRecordsFailedLoads(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a1','acme','Acme',?,?)`, now, now).Error; err != nil {
		t.Fatal(err)
	}
	deps := registry.NewDeployments(db)
	st, err := deps.StartBuild(ctx, registry.BuildRequest{AgentID: "a1", Environment: "production", Commit: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := deps.FinishBuild(ctx, st.Build.ID, registry.BuildOutcome{Steps: "[]", BundleKey: "bundles/acme/c1", Digest: "sha256:c1", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	var loads atomic.Int32
	var broken atomic.Bool
	broken.Store(true)
	var closed atomic.Int32
	var elapsed atomic.Int64 // the router's clock, moved by the test alone
	start := time.Now()
	router, err := runner.NewRouter(runner.Config{
		Resolver: deps, AppsDomain: "apps.localhost", Reporter: deps, RetryAfter: time.Minute,
		Now: func() time.Time { return start.Add(time.Duration(elapsed.Load())) },
		LoadBundle: func(context.Context, registry.Deployment) (*agent.Agent, error) {
			loads.Add(1)
			if broken.Load() {
				return nil, errors.New("bundle damaged")
			}
			return &agent.Agent{}, nil
		},
		NewRuntime: func(_ context.Context, _ *agent.Agent, d registry.Deployment) (runner.Runtime, error) {
			return healthRuntime{id: d.ID, closed: &closed}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer router.Close()
	get := func() int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/health", nil)
		req.Host = "acme.apps.localhost"
		router.ServeHTTP(rec, req)
		return rec.Code
	}
	recorded := func() string {
		got, err := deps.Get(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.RuntimeError
	}
	for range 3 {
		if code := get(); code != 503 {
			t.Fatalf("GET with a broken bundle = %d, want 503", code)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("%d loads within RetryAfter, want 1", n)
	}
	if msg := recorded(); msg != "bundle damaged" {
		t.Errorf("recorded runtime error = %q", msg)
	}
	broken.Store(false)
	elapsed.Store(int64(59 * time.Second))
	if code := get(); code != 503 {
		t.Fatalf("GET before RetryAfter elapsed = %d, want the remembered 503", code)
	}
	elapsed.Store(int64(time.Minute))
	if code := get(); code != 200 {
		t.Fatalf("GET after the bundle was mended = %d, want 200", code)
	}
	if msg := recorded(); msg != "" {
		t.Errorf("runtime error after a good load = %q, want cleared", msg)
	}
}

// TestRouterCrossOrigin: on an agent host, a preflight is answered without resolving anything,
// and the router's own errors carry Access-Control-Allow-Origin so the page can read them.
func TestRouterCrossOrigin(t *testing.T) {
	db := dbtest.SQLite(t)
	router, err := runner.NewRouter(runner.Config{
		Resolver: registry.NewDeployments(db), AppsDomain: "apps.localhost",
		LoadBundle: func(context.Context, registry.Deployment) (*agent.Agent, error) { return &agent.Agent{}, nil },
		NewRuntime: func(context.Context, *agent.Agent, registry.Deployment) (runner.Runtime, error) {
			return nil, errors.New("unused")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer router.Close()
	pre := httptest.NewRequest("OPTIONS", "/chat/stream", nil)
	pre.Host = "nobody.apps.localhost"
	pre.Header.Set("Access-Control-Request-Method", "POST")
	rec := httptest.NewRecorder()
	router.ServeHTTP(rec, pre)
	if rec.Code != 204 || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight = %d %v", rec.Code, rec.Header())
	}
	get := httptest.NewRequest("GET", "/health", nil)
	get.Host = "nobody.apps.localhost"
	rec = httptest.NewRecorder()
	router.ServeHTTP(rec, get)
	if rec.Code != 404 || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("unknown agent = %d %v", rec.Code, rec.Header())
	}
}

// TestRouterSaysWhyARuntimeDidNotStart: the 503 of a runtime that could not start gives the
// reason when it is about the agent, and only that the platform failed otherwise (the full
// text is the deployment's runtimeError).
func TestRouterSaysWhyARuntimeDidNotStart(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a1','acme','Acme',?,?)`, now, now).Error; err != nil {
		t.Fatal(err)
	}
	deps := registry.NewDeployments(db)
	st, err := deps.StartBuild(ctx, registry.BuildRequest{AgentID: "a1", Environment: "production", Commit: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := deps.FinishBuild(ctx, st.Build.ID, registry.BuildOutcome{Steps: "[]", BundleKey: "bundles/acme/c1", Digest: "sha256:c1", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		err     error
		want    string
		wantNot string
	}{
		{
			name: "the agent's source", err: agent.Problems{{File: "svc.json", Line: 3, Message: `unknown field "colour"`}},
			want: `could not start: agent: invalid source tree:; svc.json:3: unknown field "colour"; it is tried again every 1ms`,
		},
		{
			name: "the agent's stores entry", err: fmt.Errorf("%w: field %q must be one of memory, sqlite, postgres", stores.ErrConfig, "stores.backend"),
			want: `field "stores.backend" must be one of memory, sqlite, postgres`,
		},
		{
			name: "the platform", err: errors.New("open bundle: dial tcp 10.1.2.3:9000: connection refused"),
			want: "the platform could not load its bundle (an error of the platform, not of the agent", wantNot: "10.1.2.3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			router, err := runner.NewRouter(runner.Config{
				Resolver: deps, AppsDomain: "apps.localhost", Reporter: deps, RetryAfter: time.Millisecond,
				LoadBundle: func(context.Context, registry.Deployment) (*agent.Agent, error) { return nil, tt.err },
				NewRuntime: func(context.Context, *agent.Agent, registry.Deployment) (runner.Runtime, error) {
					return nil, errors.New("not reached")
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer router.Close()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/chat", nil)
			req.Host = "acme.apps.localhost"
			router.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != 503 || !strings.Contains(body, `"RUNTIME_UNAVAILABLE"`) || !strings.Contains(body, "the runtime of deployment "+d.ID+" could not start: ") {
				t.Fatalf("POST /chat = %d %s, want 503 RUNTIME_UNAVAILABLE", rec.Code, body)
			}
			var e struct{ Error struct{ Message string } }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(e.Error.Message, tt.want) || tt.wantNot != "" && strings.Contains(body, tt.wantNot) {
				t.Errorf("message %q, want it to say %q (and not %q)", e.Error.Message, tt.want, tt.wantNot)
			}
			if got, err := deps.Get(ctx, d.ID); err != nil || got.RuntimeError != tt.err.Error() {
				t.Errorf("recorded runtime error = %q, %v; want the whole error %q", got.RuntimeError, err, tt.err)
			}
		})
	}
}

// countingResolver is the registry's resolver (a Watcher too) with its reads counted once
// they are done (a count seen means the read saw the database as it was then); while hold is
// set, each read waits for a value on it after reading.
type countingResolver struct {
	*registry.Deployments
	reads atomic.Int32
	hold  atomic.Pointer[chan struct{}]
}

func (c *countingResolver) ForHost(ctx context.Context, slug, deployID string) (registry.Deployment, error) {
	d, err := c.Deployments.ForHost(ctx, slug, deployID)
	c.reads.Add(1)
	if h := c.hold.Load(); h != nil {
		<-*h
	}
	return d, err
}

// acmeBuilds adds the agent a1 (slug acme) to db and returns a function that builds one of its
// commits in an environment through deps, ready there, and active there when activate is set.
func acmeBuilds(t *testing.T, db *gorm.DB, deps *registry.Deployments) func(env, commit string, activate bool) registry.Deployment {
	t.Helper()
	now := time.Now().UTC()
	if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a1','acme','Acme',?,?)`, now, now).Error; err != nil {
		t.Fatal(err)
	}
	return func(env, commit string, activate bool) registry.Deployment {
		t.Helper()
		ctx := context.Background()
		st, err := deps.StartBuild(ctx, registry.BuildRequest{AgentID: "a1", Environment: env, Commit: commit})
		if err != nil {
			t.Fatal(err)
		}
		d, err := deps.FinishBuild(ctx, st.Build.ID, registry.BuildOutcome{Steps: "[]", BundleKey: "bundles/acme/" + commit, Digest: "sha256:" + commit, Activate: activate})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// TestRouterKeepsHostsUntilAChange: a host's deployment is read once and then answered from
// memory; a promote, activate or rollback through the registry is seen by the very next request,
// a change committed by another process (written to the database behind the registry's back)
// within HostTTL; a read that began before a change is never kept; unknown hosts are not kept.
func TestRouterKeepsHostsUntilAChange(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		deps := registry.NewDeployments(db)
		build := acmeBuilds(t, db, deps)
		res := &countingResolver{Deployments: deps}
		var elapsed atomic.Int64 // the router's clock, moved by the test alone
		start := time.Now()
		var closed atomic.Int32
		router, err := runner.NewRouter(runner.Config{
			Resolver: res, AppsDomain: "apps.localhost", HostTTL: time.Minute,
			Now:        func() time.Time { return start.Add(time.Duration(elapsed.Load())) },
			LoadBundle: func(context.Context, registry.Deployment) (*agent.Agent, error) { return &agent.Agent{}, nil },
			NewRuntime: func(_ context.Context, _ *agent.Agent, d registry.Deployment) (runner.Runtime, error) {
				return healthRuntime{id: d.ID, closed: &closed}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer router.Close()
		get := func(host string) string {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/health", nil)
			req.Host = host
			router.ServeHTTP(rec, req)
			var body struct {
				DeployID string `json:"deployId"`
				Error    struct{ Code string }
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			return body.DeployID + body.Error.Code
		}
		check := func(host, want string, reads int32) {
			t.Helper()
			if got := get(host); got != want {
				t.Errorf("GET %s = %s, want %s", host, got, want)
			}
			if got := res.reads.Load(); got != reads {
				t.Errorf("after GET %s: %d reads of the registry, want %d", host, got, reads)
			}
		}
		d1 := build("production", "c1", true)
		check("acme.apps.localhost", d1.ID, 1)
		check("acme.apps.localhost", d1.ID, 1)
		check("ACME.apps.localhost:8080", d1.ID, 1)

		// Through the registry: seen at once.
		staging := build("staging", "c2", true)
		check("acme.apps.localhost", d1.ID, 2)
		promoted, err := deps.Promote(ctx, registry.PromoteRequest{AgentID: "a1", From: "staging"})
		if err != nil {
			t.Fatal(err)
		}
		check("acme.apps.localhost", promoted.ID, 3)
		check("acme.apps.localhost", promoted.ID, 3)
		if _, err := deps.Rollback(ctx, "a1", "production", "", "op"); err != nil {
			t.Fatal(err)
		}
		check("acme.apps.localhost", d1.ID, 4)
		if _, err := deps.Activate(ctx, promoted.ID, "op"); err != nil {
			t.Fatal(err)
		}
		check("acme.apps.localhost", promoted.ID, 5)
		check(staging.ID+"--acme.apps.localhost", staging.ID, 6)
		check(staging.ID+"--acme.apps.localhost", staging.ID, 6)

		// Behind the registry's back (another process): within HostTTL.
		if err := db.Exec(`UPDATE deployments SET is_active = ? WHERE id = ?`, false, promoted.ID).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Exec(`UPDATE deployments SET is_active = ? WHERE id = ?`, true, d1.ID).Error; err != nil {
			t.Fatal(err)
		}
		check("acme.apps.localhost", promoted.ID, 6)
		elapsed.Store(int64(time.Minute))
		check("acme.apps.localhost", d1.ID, 7)

		// A read that began before a change answers its own request but is not kept.
		h := make(chan struct{})
		res.hold.Store(&h)
		elapsed.Store(int64(2 * time.Minute))
		done := make(chan string)
		before := res.reads.Load()
		go func() { done <- get("acme.apps.localhost") }()
		for res.reads.Load() == before {
			time.Sleep(time.Millisecond)
		}
		if _, err := deps.Activate(ctx, promoted.ID, "op"); err != nil {
			t.Fatal(err)
		}
		res.hold.Store(nil)
		close(h)
		if got := <-done; got != d1.ID {
			t.Errorf("the request whose read began before the activation = %s, want %s", got, d1.ID)
		}
		check("acme.apps.localhost", promoted.ID, 9)

		// Unknown hosts are read each time, never kept.
		for i := range 3 {
			check(fmt.Sprintf("nobody%d.apps.localhost", i), "NOT_FOUND", int32(10+i))
		}
		check("dnothing--acme.apps.localhost", "NOT_FOUND", 13)
		check("dnothing--acme.apps.localhost", "NOT_FOUND", 14)
	})
}

// A change committed by another process (its own registry.Deployments, here other) raises the
// shared change counter before its call returns; the router reads the counter at each request,
// so the very next request after the call reaches the new deployment, with no wait for a TTL. A
// counter that cannot be read makes the router read the registry, and keep nothing.
func TestRouterReadsTheSharedChangeCounter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		var counter atomic.Uint64
		var broken atomic.Bool
		other := registry.NewDeployments(db) // the API process
		defer other.Watch(func() { counter.Add(1) })()
		build := acmeBuilds(t, db, other)
		res := &countingResolver{Deployments: registry.NewDeployments(db)} // the runner's own
		router, err := runner.NewRouter(runner.Config{
			Resolver: res, AppsDomain: "apps.localhost", HostTTL: time.Hour,
			Changes: func(context.Context) (uint64, error) {
				if broken.Load() {
					return 0, errors.New("redis is down")
				}
				return counter.Load(), nil
			},
			LoadBundle: func(context.Context, registry.Deployment) (*agent.Agent, error) { return &agent.Agent{}, nil },
			NewRuntime: func(_ context.Context, _ *agent.Agent, d registry.Deployment) (runner.Runtime, error) {
				return healthRuntime{id: d.ID, closed: new(atomic.Int32)}, nil
			},
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer router.Close()
		check := func(want string, reads int32) {
			t.Helper()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/health", nil)
			req.Host = "acme.apps.localhost"
			router.ServeHTTP(rec, req)
			var body struct {
				DeployID string `json:"deployId"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if body.DeployID != want {
				t.Errorf("GET = %s, want %s", body.DeployID, want)
			}
			if got := res.reads.Load(); got != reads {
				t.Errorf("%d reads of the registry, want %d", got, reads)
			}
		}
		d1 := build("production", "c1", true)
		check(d1.ID, 1)
		check(d1.ID, 1)
		build("staging", "c2", true)
		check(d1.ID, 2) // the counter moved: read again, same answer
		promoted, err := other.Promote(ctx, registry.PromoteRequest{AgentID: "a1", From: "staging"})
		if err != nil {
			t.Fatal(err)
		}
		check(promoted.ID, 3)
		check(promoted.ID, 3)
		if _, err := other.Rollback(ctx, "a1", "production", "", "op"); err != nil {
			t.Fatal(err)
		}
		check(d1.ID, 4)
		broken.Store(true)
		check(d1.ID, 5)
		check(d1.ID, 6)
		broken.Store(false) // what was kept before still stands: the counter has not moved
		check(d1.ID, 6)
	})
}
