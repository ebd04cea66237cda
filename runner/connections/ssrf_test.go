package connections_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/tools"
)

// TestSSRFPaths: what the model writes in path cannot leave the base URL; nothing is sent.
func TestSSRFPaths(t *testing.T) {
	var hits atomic.Int64
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }),
		[]*agent.Connection{conn("status", nil, nil)}, nil)
	cases := []struct{ path, rule string }{
		{"http://169.254.169.254/latest/meta-data/", "rule: relative paths only"},
		{"https://evil.example/", "rule: relative paths only"},
		{"//169.254.169.254/latest", "rule: no host change"},
		{"/../../admin", "rule: no dot segments"},
		{"/a/%2e%2e/%2e%2e/admin", "rule: no dot segments"},
		{"/a/%2E%2e/admin", "rule: no dot segments"},
		{"/a/..%5cadmin", "rule: no backslashes"},
		{`/a\..\admin`, "rule: no backslashes"},
		{"/%2F%2F169.254.169.254/x", "rule: no empty segments"},
		{"/a/%252e%252e/admin", "rule: no dot segments"},
	}
	for _, c := range cases {
		_, err := h.call(t, `{"connection":"status","method":"GET","path":`+quote(c.path)+`}`, nil)
		if !errors.Is(err, tools.ErrBadArguments) || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("path %q: err = %v, want %q", c.path, err, c.rule)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d refused calls reached the server", n)
	}
}

// TestSSRFRedirects: redirects are never followed, to another host or the same one; the 3xx
// comes back with its Location.
func TestSSRFRedirects(t *testing.T) {
	var hits atomic.Int64
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/meta":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
		case "/same":
			http.Redirect(w, r, "/target", http.StatusMovedPermanently)
		default:
			w.WriteHeader(200)
		}
	}), []*agent.Connection{conn("status", nil, nil)}, nil)
	for path, want := range map[string]string{
		"/meta": "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"/same": "/target",
	} {
		res, err := h.call(t, `{"connection":"status","method":"GET","path":"`+path+`"}`, nil)
		out := response(t, res, err)
		if out["status"] != float64(302) && out["status"] != float64(301) {
			t.Errorf("%s: status = %v, want the redirect itself", path, out["status"])
		}
		if loc := out["headers"].(map[string]any)["Location"]; loc != want {
			t.Errorf("%s: Location = %v, want %s", path, loc, want)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("server saw %d requests, want 2 (no redirect followed)", n)
	}
}

// TestSSRFResolvedAddresses: a base URL whose name resolves to a metadata or link-local
// address is refused at dial time, checked on every dial (DNS rebinding), unless
// AllowMetadata. Loopback stays allowed.
func TestSSRFResolvedAddresses(t *testing.T) {
	h := newHarness(t, echo(200), []*agent.Connection{conn("status", nil, nil)}, nil)
	port := h.srv.URL[strings.LastIndex(h.srv.URL, ":"):]

	// A name that resolves to loopback works.
	h.secrets["API_URL"] = "http://api.test" + port
	res, err := h.call(t, `{"connection":"status","method":"GET","path":"/ok"}`, nil)
	if out := response(t, res, err); out["status"] != float64(200) {
		t.Fatalf("loopback by name: %s", res.Content)
	}

	for _, host := range []string{"metadata.test", "mixed.test", "metadata.google.internal", "alibaba.test", "v6meta.test", "mapped.test", "169.254.169.254", "[fe80::1]", "[::ffff:169.254.169.254]", "100.100.100.200"} {
		h.secrets["API_URL"] = "http://" + host + port
		_, err := h.call(t, `{"connection":"status","method":"GET","path":"/latest/meta-data"}`, nil)
		if !errors.Is(err, connections.ErrForbiddenAddress) {
			t.Errorf("%s: err = %v, want ErrForbiddenAddress", host, err)
			continue
		}
		if !strings.Contains(err.Error(), connections.EnvAllowMetadata) {
			t.Errorf("%s: error %q does not name the setting", host, err)
		}
	}

	// DNS rebinding: the first dial sees loopback, the next (a fresh connection) the metadata address.
	h.secrets["API_URL"] = "http://rebind.test" + port
	if _, err := h.call(t, `{"connection":"status","method":"GET","path":"/1"}`, nil); err != nil {
		t.Fatalf("first rebind call: %v", err)
	}
	h.client.Close() // drop the pooled connection so that the next call dials again
	if _, err := h.call(t, `{"connection":"status","method":"GET","path":"/2"}`, nil); !errors.Is(err, connections.ErrForbiddenAddress) {
		t.Errorf("rebound name: err = %v, want ErrForbiddenAddress", err)
	}
}

func TestSSRFAllowMetadata(t *testing.T) {
	h := newHarness(t, echo(200), []*agent.Connection{conn("status", nil, nil)}, func(o *connections.Options) { o.AllowMetadata = true })
	port := h.srv.URL[strings.LastIndex(h.srv.URL, ":"):]
	// metadata.google.internal maps to loopback in the test resolver: with the setting, the
	// name is no longer refused and the call goes through.
	h.secrets["API_URL"] = "http://metadata.google.internal" + port
	res, err := h.call(t, `{"connection":"status","method":"GET","path":"/computeMetadata/v1/"}`, nil)
	if out := response(t, res, err); out["status"] != float64(200) {
		t.Errorf("with AllowMetadata: %s", res.Content)
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
