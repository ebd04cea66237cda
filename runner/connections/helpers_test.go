package connections_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/tools"
)

// TestMain fails the run when goroutines of HTTP clients, servers or this package outlive
// the tests (the fuzzing engine's own goroutines are not ours to count).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		var left []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			left = leftGoroutines()
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(left) > 0 {
			os.Stderr.WriteString("goroutines leaked:\n\n" + strings.Join(left, "\n\n") + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// leftGoroutines returns the stacks of goroutines in net/http or this package, but the caller's.
func leftGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the goroutine running TestMain
			continue
		}
		if strings.Contains(g, "net/http.") || strings.Contains(g, "svc/runner/connections") {
			left = append(left, g)
		}
	}
	return left
}

// Secret values of the test connections. The test server echoes what it receives; none of
// these may come back.
const (
	secretToken = "Bearer sk-test-TOKEN-8c1f0e9a"
	secretKey   = "key/SECRET+abc def-123456789"
)

// testResolver maps test names to addresses, like DNS would, counting lookups.
type testResolver struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	// next, when set for a name, replaces its answer after the first lookup (DNS rebinding).
	next map[string][]netip.Addr
}

func newResolver() *testResolver {
	lo := netip.MustParseAddr("127.0.0.1")
	meta := netip.MustParseAddr("169.254.169.254")
	return &testResolver{
		names: map[string][]netip.Addr{
			"api.test":                 {lo},
			"metadata.test":            {meta},
			"mixed.test":               {lo, meta},
			"metadata.google.internal": {lo},
			"alibaba.test":             {netip.MustParseAddr("100.100.100.200")},
			"v6meta.test":              {netip.MustParseAddr("fd00:ec2::254")},
			"mapped.test":              {netip.MustParseAddr("::ffff:169.254.169.254")},
			"rebind.test":              {lo},
		},
		next: map[string][]netip.Addr{"rebind.test": {meta}},
	}
}

func (r *testResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs, ok := r.names[host]
	if !ok {
		return nil, &netErr{"no such host " + host}
	}
	if n, ok := r.next[host]; ok {
		r.names[host] = n
		delete(r.next, host)
	}
	return addrs, nil
}

type netErr struct{ s string }

func (e *netErr) Error() string { return e.s }

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// harness is a Client over connections to a test server.
type harness struct {
	srv     *httptest.Server
	client  *connections.Client
	tool    *connections.Tool
	logs    *syncBuffer
	clock   *clock
	secrets map[string]string
}

// newHarness starts srv's handler on 127.0.0.1 and builds a Client over conns; every
// connection's baseUrl "env:API_URL" resolves to the server, "env:API_TOKEN" and "env:API_KEY"
// to the secrets. opts may adjust the options.
func newHarness(t testing.TB, h http.Handler, conns []*agent.Connection, opts func(*connections.Options)) *harness {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	hs := &harness{srv: srv, logs: &syncBuffer{}, clock: &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	hs.secrets = map[string]string{
		"API_URL":   srv.URL,
		"API_TOKEN": secretToken,
		"API_KEY":   secretKey,
		"API_HOST":  strings.Replace(srv.URL, "127.0.0.1", "api.test", 1),
	}
	o := connections.Options{
		Secret: func(_ context.Context, name string) (string, bool, error) {
			v, ok := hs.secrets[name]
			return v, ok, nil
		},
		Resolver: newResolver(),
		Now:      hs.clock.Now,
		Logger:   slog.New(slog.NewTextHandler(hs.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if opts != nil {
		opts(&o)
	}
	c, err := connections.New(conns, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	hs.client = c
	hs.tool, err = c.Tool(c.Names())
	if err != nil {
		t.Fatalf("Tool: %v", err)
	}
	return hs
}

// call runs the tool with args (a JSON object) and the session context ctx.
func (h *harness) call(t testing.TB, args string, ctx map[string]string) (tools.Result, error) {
	t.Helper()
	return h.tool.Call(context.Background(), tools.Call{ID: "c1", Arguments: json.RawMessage(args), Session: tools.Session{ID: "s1", Context: ctx}})
}

// response decodes a successful result.
func response(t testing.TB, res tools.Result, err error) map[string]any {
	t.Helper()
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	var out map[string]any
	if e := json.Unmarshal([]byte(res.Content), &out); e != nil {
		t.Fatalf("result is not JSON: %v\n%s", e, res.Content)
	}
	if !bytes.Equal(res.Data, []byte(res.Content)) {
		t.Errorf("Data differs from Content")
	}
	return out
}

// conn is a connection to the harness server with an auth header and query.
func conn(name string, policy *agent.Policy, access *agent.Access) *agent.Connection {
	return &agent.Connection{
		Name: name,
		Spec: agent.ConnectionSpec{
			BaseURL: "env:API_URL", Format: "rest", TestPath: "/health",
			Auth: &agent.ConnectionAuth{Headers: map[string]string{"Authorization": "env:API_TOKEN"}, Query: map[string]string{"api_key": "env:API_KEY"}},
		},
		Policy:  policy,
		Access:  access,
		Surface: "# " + name + "\n\nThe " + name + " API.",
	}
}

// echo answers every request with JSON describing it (method, path, query, headers, body) —
// the worst case for secrets — plus the extra fields of the route /incidents/*.
func echo(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		out := map[string]any{
			"method": r.Method, "path": r.URL.EscapedPath(), "query": r.URL.Query(), "url": r.URL.String(),
			"headers": r.Header, "body": string(body),
			"customer": map[string]any{"name": "Ada", "email": "ada@example.com", "ssn": "123-45-6789"},
			"items":    []any{map[string]any{"id": 1, "Email": "x@example.com", "secret": "s1"}, map[string]any{"id": 2, "secret": "s2"}},
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "session=abc")
		w.Header().Set("X-Request-Id", "req-1")
		w.Header().Set("Server", "test")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(out)
	}
}
