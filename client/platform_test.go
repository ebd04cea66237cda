package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/agent"
	"svc/api"
	"svc/auth"
	"svc/builder"
	"svc/bundle"
	"svc/client"
	"svc/deploy"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/registry/fsobjects"
	"svc/runner"
	"svc/runner/runtime"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/memstore"
	"svc/runner/sessions/objblobs"
	"svc/webhook"
	"svc/workers"
	"svc/workers/dbqueue"
)

// platform is the real platform running in this test: the platform API, the build queue with its
// worker, and the agent router with real runtimes, on a migrated SQLite database and a filesystem
// object store under t.TempDir(), behind one listener, wired as `svc up` wires them
// (cmd/svc/roles.go). Only model APIs are not real: agents use the echo model or a modelstest server.
type platform struct {
	url   string // the platform's base URL (agents are <slug>.apps.localhost on its port)
	port  string
	token string // an admin pk_ token
	c     *client.Client
}

// startPlatform starts a platform that stops, with every goroutine it started, when t ends.
func startPlatform(t *testing.T) *platform {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	db := dbtest.SQLite(t)
	fsStore, err := fsobjects.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objects := registry.Checked(fsStore)
	signer, err := auth.NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	cipher, err := registry.NewCipher(bytes.Repeat([]byte("s"), 32))
	if err != nil {
		t.Fatal(err)
	}
	tokens := registry.NewTokens(db)
	stores := registry.NewStores(db, cipher, objects, webhook.NormalizeRepoURL)

	// Builds: the build handler on the in-process queue, as svc up runs them.
	queue, err := dbqueue.New(db, dbqueue.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	creds := builder.Credentials{Secrets: stores.Secrets}
	mux := workers.NewServeMux()
	mux.Handle(workers.TaskBuild, workers.NewBuildHandler(workers.BuildConfig{
		Deployments: stores.Deployments, Logs: stores.BuildLogs, Objects: objects, Sources: workers.NewRegistrySources(stores),
		Credentials: creds, Limits: builder.DefaultLimits(), Logger: log,
	}))
	deployer := deploy.New(deploy.Config{
		Deployments: stores.Deployments, Queue: queue, Sources: workers.NewRegistrySources(stores), Pushes: stores.Pushes,
		Credentials: creds, Limits: builder.DefaultLimits(), Objects: objects, Logger: log,
	})

	// Agents: the router with a runtime per deployment, sessions in the database.
	revocations := auth.NewRevocations(signer, tokens, 0, log)
	if err := revocations.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	sessionStore, locks := dbstore.New(db), &memstore.Locks{}
	router, err := runner.NewRouter(runner.Config{
		Resolver: stores.Deployments, AppsDomain: "apps.localhost", Logger: log, Reporter: stores.Deployments,
		LoadBundle: func(ctx context.Context, d registry.Deployment) (*agent.Agent, error) {
			rc, _, err := objects.Get(ctx, d.BundleKey)
			if err != nil {
				return nil, err
			}
			defer rc.Close() //nolint:errcheck // read-only
			b, err := bundle.Read(rc, d.BundleKey)
			if err != nil {
				return nil, err
			}
			return b.Agent()
		},
		NewRuntime: func(_ context.Context, a *agent.Agent, d registry.Deployment) (runner.Runtime, error) {
			return runtime.New(runtime.Options{
				Agent: a, AgentID: d.AgentID, DeployID: d.ID, Sessions: sessionStore, Locker: locks, SharedStore: true,
				Verifier: revocations, Blobs: objblobs.New(objects, d.AgentID), Logger: log,
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	a, err := api.New(api.Deps{
		Stores: stores, Objects: objects, Tokens: tokens, APIKeys: registry.NewAPIKeys(db), Signer: signer,
		AppsDomain: "apps.localhost:" + port, Logger: log, Metrics: prometheus.NewRegistry(), Deployer: deployer, Runtimes: router,
	})
	if err != nil {
		t.Fatal(err)
	}
	platformAPI := a.Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if router.Match(r) {
			router.ServeHTTP(w, r)
			return
		}
		platformAPI.ServeHTTP(w, r)
	}))
	srv.Listener.Close() //nolint:errcheck // replaced by the listener whose port the API knows
	srv.Listener = ln
	srv.Start()

	runCtx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := queue.Run(runCtx, mux); err != nil {
			t.Errorf("build queue: %v", err)
		}
	})
	t.Cleanup(func() {
		router.Close() // ends the runtimes' streams, so that the server can close
		srv.Close()
		cancel(errors.New("test over"))
		wg.Wait()
	})

	_, admin, err := tokens.Create(ctx, "test admin", auth.Admin, "")
	if err != nil {
		t.Fatal(err)
	}
	return &platform{url: srv.URL, port: port, token: admin, c: client.New(srv.URL, admin, nil)}
}

// agentURL is the agent's persistent URL, or with deployID its pinned one.
func (p *platform) agentURL(slug, deployID string) string {
	if deployID != "" {
		slug = deployID + "--" + slug
	}
	return "http://" + slug + ".apps.localhost:" + p.port
}

// writeTree writes files (slash paths to text) into a new folder and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// deploy creates an agent named slug, uploads dir as its source, deploys it to production, waits
// for the build and activates the deployment: the agent then answers at its persistent URL.
func (p *platform) deploy(t *testing.T, slug, dir string) (client.Agent, client.Deployment) {
	t.Helper()
	ctx := context.Background()
	a, err := p.c.CreateAgent(ctx, slug, "")
	if err != nil {
		t.Fatal(err)
	}
	sv, err := p.c.UploadDir(ctx, a.AgentID, dir)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := p.c.Redeploy(ctx, client.RedeployRequest{AgentID: a.AgentID, SourceVersionID: sv.SourceVersionID})
	if err != nil {
		t.Fatal(err)
	}
	d := p.settled(t, rd.DeployID)
	if d.Status != client.StatusReady {
		t.Fatalf("deployment %s is %s: %s", d.DeployID, d.Status, d.Error)
	}
	if d, err = p.c.Activate(ctx, d.DeployID); err != nil {
		t.Fatal(err)
	}
	return a, d
}

// settled waits until the deployment's status can no longer change by itself and returns it.
func (p *platform) settled(t *testing.T, deployID string) client.Deployment {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		d, err := p.c.Deployment(context.Background(), deployID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Settled() || time.Now().After(deadline) {
			return d
		}
	}
}

// hostRequest sends a request to an agent host through the platform's address, as ChatStream
// does, and returns the status and body.
func (p *platform) hostRequest(t *testing.T, method, agentURL, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = strings.TrimPrefix(agentURL, "http://")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body.String()
}
