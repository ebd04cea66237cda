package api_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"svc/agent/agenttest"
	"svc/api"
	"svc/auth"
	"svc/builder"
	"svc/deploy"
	"svc/registry"
	"svc/registry/fsobjects"
	"svc/webhook"
	"svc/workers"
	"svc/workers/dbqueue"
)

// newDeployer is the push and redeploy policy of the harness, with a build handler on the
// in-process queue running until t ends.
func newDeployer(t *testing.T, db *gorm.DB, objects registry.Objects, secretKey []byte) (*deploy.Deployer, *registry.Stores) {
	t.Helper()
	cipher, err := registry.NewCipher(secretKey)
	if err != nil {
		t.Fatal(err)
	}
	stores := registry.NewStores(db, cipher, objects, webhook.NormalizeRepoURL)
	q, err := dbqueue.New(db, dbqueue.Config{PollInterval: 20 * time.Millisecond, RetryBase: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	creds := builder.Credentials{Secrets: stores.Secrets}
	mux := workers.NewServeMux()
	mux.Handle(workers.TaskBuild, workers.NewBuildHandler(workers.BuildConfig{
		Deployments: stores.Deployments, Logs: stores.BuildLogs, Objects: objects, Sources: workers.NewRegistrySources(stores), Credentials: creds,
	}))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := q.Run(ctx, mux); err != nil {
			t.Errorf("queue: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	d := deploy.New(deploy.Config{
		Deployments: stores.Deployments, Queue: q, Sources: workers.NewRegistrySources(stores), Pushes: stores.Pushes, Credentials: creds,
	})
	return d, stores
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness is a platform API over a real database and filesystem object store, with every log
// line and response body kept for the no-leak test.
type harness struct {
	t        *testing.T
	db       *gorm.DB
	api      *api.API
	handler  http.Handler
	tokens   *registry.Tokens
	apiKeys  *registry.APIKeys
	signer   *auth.Signer
	objects  registry.Objects
	logs     *syncBuffer
	metrics  *prometheus.Registry
	deployer *deploy.Deployer

	mu     sync.Mutex
	bodies []string

	admin  string // an unbound admin token
	stores *registry.Stores
}

func newHarness(t *testing.T, db *gorm.DB) *harness {
	t.Helper()
	objects, err := fsobjects.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t: t, db: db, tokens: registry.NewTokens(db), apiKeys: registry.NewAPIKeys(db), signer: signer,
		objects: registry.Checked(objects), logs: &syncBuffer{}, metrics: prometheus.NewRegistry(),
	}
	h.deployer, h.stores = newDeployer(t, db, h.objects, bytes.Repeat([]byte("s"), 32))
	a, err := api.New(api.Deps{
		Stores: h.stores, Objects: objects, Tokens: h.tokens, APIKeys: h.apiKeys, Signer: signer, Deployer: h.deployer,
		// Evals are recorded, not run: this harness has no runner.
		Evals: func(ctx context.Context, d registry.Deployment) (registry.EvalRun, error) {
			return h.stores.EvalRuns.Create(ctx, d.AgentID, d.ID, d.CommitSHA)
		},
		AppsDomain: "apps.localhost:8080",
		Logger:     slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:    h.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.api, h.handler = a, a.Handler()
	_, h.admin = h.mintToken(auth.Admin, "")
	return h
}

// mintToken creates an automation token straight in the store.
func (h *harness) mintToken(kind auth.Kind, agentID string) (registry.Token, string) {
	h.t.Helper()
	tok, value, err := h.tokens.Create(context.Background(), "test "+string(kind), kind, agentID)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok, value
}

// request is one call: a JSON body (any value but io.Reader and []byte is marshalled) or raw bytes.
type request struct {
	method, path, token string
	body                any
	contentType         string
	header              map[string]string
}

// do serves r and records the response body.
func (h *harness) do(r request) *httptest.ResponseRecorder {
	h.t.Helper()
	var body io.Reader
	ct := r.contentType
	switch b := r.body.(type) {
	case nil:
	case io.Reader:
		body = b
	case []byte:
		body = bytes.NewReader(b)
	case string:
		body = strings.NewReader(b)
		if ct == "" {
			ct = "application/json"
		}
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		body = bytes.NewReader(data)
		if ct == "" {
			ct = "application/json"
		}
	}
	req := httptest.NewRequest(r.method, r.path, body)
	if _, ok := r.body.(io.Reader); ok {
		req.ContentLength = -1 // a stream of unknown length, as a chunked upload
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.handler.ServeHTTP(rec, req)
	h.mu.Lock()
	h.bodies = append(h.bodies, fmt.Sprint(rec.Header())+"\n"+rec.Body.String())
	h.mu.Unlock()
	return rec
}

// call does a JSON call and decodes the answer into out (when not nil), failing unless the
// status is want.
func (h *harness) call(method, path, token string, body any, want int, out any) {
	h.t.Helper()
	rec := h.do(request{method: method, path: path, token: token, body: body})
	if rec.Code != want {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, rec.Code, rec.Body.String(), want)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			h.t.Fatalf("%s %s: decode %q: %v", method, path, rec.Body.String(), err)
		}
	}
}

// createAgent makes an agent through the API and returns its id.
func (h *harness) createAgent(name string) string {
	h.t.Helper()
	var out struct {
		AgentID string `json:"agentId"`
	}
	h.call(http.MethodPost, "/api/agents", h.admin, map[string]any{"name": name}, http.StatusCreated, &out)
	return out.AgentID
}

// decode decodes a JSON response.
func decode(t *testing.T, rec *httptest.ResponseRecorder, out any) {
	t.Helper()
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("decode %q: %v", rec.Body.String(), err)
	}
}

// errorEnvelope is the error body.
type errorEnvelope struct {
	Error struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Field    string `json:"field"`
		Problems []struct {
			File    string `json:"file"`
			Line    int    `json:"line"`
			Message string `json:"message"`
		} `json:"problems"`
	} `json:"error"`
}

func errorOf(t *testing.T, rec *httptest.ResponseRecorder) errorEnvelope {
	t.Helper()
	var e errorEnvelope
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
		t.Fatalf("body %q is not an error envelope: %v", rec.Body.String(), err)
	}
	return e
}

// fixtureFiles reads a fixture tree as {path: text}.
func fixtureFiles(t *testing.T, name string) map[string]string { return agenttest.Files(t, name) }

// tarGz packs files into a tar.gz, in the order given by names (or map order when nil), with
// the given modification time, so tests can vary what must not change the digest.
func tarGz(t *testing.T, files map[string]string, names []string, mtime time.Time) []byte {
	t.Helper()
	if names == nil {
		for name := range files {
			names = append(names, name)
		}
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range names {
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./" + name, Mode: 0o640, Size: int64(len(data)), ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
