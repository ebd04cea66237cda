package connections_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/tools"
)

func TestNewErrors(t *testing.T) {
	cases := []struct {
		conn *agent.Connection
		want string
	}{
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "ftp://x", Format: "rest"}}, "connection a: baseUrl must be an absolute http(s) URL"},
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "https://u:p@x", Format: "rest"}}, "must not hold credentials"},
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "https://x/?k=1", Format: "rest"}}, "must not have a query"},
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "http://169.254.169.254/latest", Format: "rest"}}, "link-local address"},
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "http://metadata.google.internal/", Format: "rest"}}, "cloud metadata service"},
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "env:lower", Format: "rest"}}, "not a valid env: reference"},
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "https://x", Format: "graphql"}}, `format must be "rest"`},
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "https://x"}, Access: &agent.Access{RateLimit: &agent.RateLimit{}}}, "rateLimit needs requestsPerMinute > 0"},
		{&agent.Connection{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "https://x"}, Access: &agent.Access{Endpoints: map[string]string{"GET /{a}": "allow", "GET /{b}": "deny"}}}, `access.json: endpoints "GET /{a}" and "GET /{b}" match the same calls`},
	}
	for _, c := range cases {
		_, err := connections.New([]*agent.Connection{c.conn}, connections.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", c.conn.Spec, err, c.want)
		}
	}
	if _, err := connections.New([]*agent.Connection{{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "http://169.254.169.254"}}}, connections.Options{AllowMetadata: true}); err != nil {
		t.Errorf("AllowMetadata: %v", err)
	}
	c, err := connections.New([]*agent.Connection{{Name: "a", Spec: agent.ConnectionSpec{BaseURL: "https://x"}}}, connections.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tool([]string{"b"}); err == nil || !strings.Contains(err.Error(), `no connection "b" (known: a)`) {
		t.Errorf("Tool(b) = %v", err)
	}
	if _, err := c.Tool(nil); err == nil {
		t.Error("Tool(nil) made a tool without connections")
	}
}

// TestTLS: Options.Transport is the base of the client's transport (here: the test server's
// certificate), and a request over TLS still goes through the checked dialer.
func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(echo(200))
	t.Cleanup(srv.Close)
	c, err := connections.New([]*agent.Connection{{Name: "tls", Spec: agent.ConnectionSpec{BaseURL: srv.URL, Format: "rest"}}},
		connections.Options{Transport: srv.Client().Transport.(*http.Transport), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	tool, err := c.Tool(c.Names())
	if err != nil {
		t.Fatal(err)
	}
	res, err := tool.Call(context.Background(), tools.Call{Arguments: json.RawMessage(`{"connection":"tls","method":"GET","path":"/x"}`)})
	if out := response(t, res, err); out["status"] != float64(200) {
		t.Errorf("TLS call: %s", res.Content)
	}
	// Without the server's certificate the call fails, naming no secret and no panic.
	plain, err := connections.New([]*agent.Connection{{Name: "tls", Spec: agent.ConnectionSpec{BaseURL: srv.URL, Format: "rest"}}}, connections.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	tool, _ = plain.Tool(plain.Names())
	if _, err := tool.Call(context.Background(), tools.Call{Arguments: json.RawMessage(`{"connection":"tls","method":"GET","path":"/x"}`)}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
}

func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}), []*agent.Connection{conn("slow", nil, nil)}, func(o *connections.Options) { o.Timeout = 50 * time.Millisecond })
	defer close(release)
	_, err := h.call(t, `{"connection":"slow","method":"GET","path":"/x"}`, nil)
	if err == nil || !strings.Contains(err.Error(), "no answer within 50ms") {
		t.Errorf("err = %v", err)
	}
}

// TestCheck is the health probe: testPath with the connection's auth, outside the rate limit.
func TestCheck(t *testing.T) {
	var auth string
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if r.URL.Path != "/health" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}), []*agent.Connection{
		conn("ok", nil, &agent.Access{RateLimit: &agent.RateLimit{RequestsPerMinute: 1}}),
		{Name: "untested", Spec: agent.ConnectionSpec{BaseURL: "env:API_URL", Format: "rest"}},
		{Name: "down", Spec: agent.ConnectionSpec{BaseURL: "env:API_URL", Format: "rest", TestPath: "/ready"}},
		{Name: "unset", Spec: agent.ConnectionSpec{BaseURL: "env:NOT_SET", Format: "rest", TestPath: "/health"}},
	}, nil)
	ctx := context.Background()
	for range 3 {
		if err := h.client.Check(ctx, "ok"); err != nil {
			t.Fatalf("Check(ok) = %v", err)
		}
	}
	if auth != secretToken {
		t.Errorf("the probe sent Authorization %q", auth)
	}
	if err := h.client.Check(ctx, "untested"); !errors.Is(err, connections.ErrNoTestPath) {
		t.Errorf("Check(untested) = %v", err)
	}
	if err := h.client.Check(ctx, "down"); err == nil || !strings.Contains(err.Error(), "GET /ready answered 503") {
		t.Errorf("Check(down) = %v", err)
	}
	if err := h.client.Check(ctx, "unset"); err == nil || !strings.Contains(err.Error(), "baseUrl: env:NOT_SET is not set") {
		t.Errorf("Check(unset) = %v", err)
	}
	if err := h.client.Check(ctx, "nope"); err == nil {
		t.Error("Check of an unknown connection passed")
	}
}
