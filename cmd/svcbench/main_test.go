package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/runtime"
)

func TestValidate(t *testing.T) {
	good := config{url: "http://x", concurrency: 1, duration: time.Second, chunks: 32, turnsPerSess: 1}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*config){
		"no target":      func(c *config) { c.url = "" },
		"concurrency 0":  func(c *config) { c.concurrency = 0 },
		"duration 0":     func(c *config) { c.duration = 0 },
		"duration 11m":   func(c *config) { c.duration = 11 * time.Minute },
		"chunks 0":       func(c *config) { c.chunks = 0 },
		"hold-for -1s":   func(c *config) { c.holdFor = -time.Second },
		"negative idle":  func(c *config) { c.idleSessions = -1 },
		"turns/session0": func(c *config) { c.turnsPerSess = 0 },
		"https url":      func(c *config) { c.url = "https://x" },
		"no host":        func(c *config) { c.url = "http:///base" },
		"query in url":   func(c *config) { c.url = "http://x/?a=b" },
		"token with CR":  func(c *config) { c.token = "a\r\nX: y" },
		"host with CR":   func(c *config) { c.host = "a\r\nX: y" },
		"host with path": func(c *config) { c.host = "a/b" },
		"host, no url":   func(c *config) { c.url, c.host = "", "a" },
		"tls, no fake":   func(c *config) { c.fakeTLS = "cert.pem" },
	} {
		c := good
		mut(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "https url" && !strings.Contains(err.Error(), "-url") {
			t.Errorf("%s: %v does not name -url", name, err)
		}
	}
}

func TestProcStats(t *testing.T) {
	cpu, err := procCPU(os.Getpid())
	if err != nil || cpu < 0 {
		t.Fatalf("procCPU = %v, %v", cpu, err)
	}
	rss, err := procRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("procRSS = %d, %v", rss, err)
	}
	if anon, err := procAnon(os.Getpid()); err != nil || anon <= 0 || anon > rss {
		t.Fatalf("procAnon = %d, %v; want within RSS %d", anon, err, rss)
	}
}

// TestTurnAgainstRuntime drives real turns through the fake model and a runtime.
func TestTurnAgainstRuntime(t *testing.T) {
	srv := startRuntime(t, false)
	d := mustDriver(t, config{url: srv.URL, message: "hi", turnsPerSess: 2})
	cl := d.newClient(context.Background(), 16<<10)
	defer cl.Close()
	session, res := d.turn(cl, "")
	if res.err != nil || res.ttfd <= 0 || session == "" {
		t.Fatalf("turn: session %q, %+v", session, res)
	}
	again, res := d.turn(cl, session)
	if res.err != nil || again != session {
		t.Fatalf("second turn: session %q (want %q), %v", again, session, res.err)
	}
	// A refused turn is an error with the runtime's answer.
	bad := mustDriver(t, config{url: srv.URL + "/nope", message: "hi"})
	bcl := bad.newClient(context.Background(), 16<<10)
	defer bcl.Close()
	if _, res := bad.turn(bcl, ""); res.err == nil || !strings.Contains(res.err.Error(), "status") {
		t.Errorf("bad route: %v", res.err)
	}
}

// TestHostHeader: with -host, a turn goes to -url's address with that Host header, as an agent
// host of the platform's router needs.
func TestHostHeader(t *testing.T) {
	inner := startRuntime(t, false)
	hosts := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hosts <- r.Host:
		default:
		}
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	d := mustDriver(t, config{url: srv.URL, host: "hello.apps.localhost:8080", message: "hi"})
	cl := d.newClient(context.Background(), 16<<10)
	defer cl.Close()
	if _, res := d.turn(cl, ""); res.err != nil {
		t.Fatal(res.err)
	}
	if got := <-hosts; got != "hello.apps.localhost:8080" {
		t.Errorf("Host = %q, want hello.apps.localhost:8080", got)
	}
}

// TestOpenStreamsAgainstRuntime holds streams open through a runtime and a holding fake, then
// ends them all.
func TestOpenStreamsAgainstRuntime(t *testing.T) {
	srv := startRuntime(t, true)
	d := mustDriver(t, config{url: srv.URL, message: "hi", openStreams: 3, pid: os.Getpid()})
	if err := d.streams(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestOpenStreamsOverHTTP2: with the fake over TLS, the runtime's model transport reaches it
// over HTTP/2, the held streams sharing one connection.
func TestOpenStreamsOverHTTP2(t *testing.T) {
	certFile := filepath.Join(t.TempDir(), "cert.pem")
	fake, err := startTLSFake("127.0.0.1:0", certFile, fakeOptions{chunks: 32, hold: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	tr := runtime.ModelTransport()
	tr.HTTPS.TLSClientConfig = &tls.Config{RootCAs: certPool(t, certFile)} // SSL_CERT_FILE in a real run
	t.Cleanup(tr.CloseIdleConnections)
	srv := serveRuntime(t, "https://"+fake.Addr()+"/v1", &http.Client{Transport: tr})
	d := mustDriver(t, config{url: srv.URL, message: "hi", openStreams: 3, pid: os.Getpid()})
	if err := d.streams(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h2, h1, conns := fake.stats(); h2 != 3 || h1 != 0 || conns != 1 {
		t.Errorf("fake served %d streams over HTTP/2, %d over HTTP/1.x, on %d connections; want 3, 0, 1", h2, h1, conns)
	}
}

// TestTLSFakeAnswers: the TLS fake answers a client that trusts its certificate file with the
// whole stream over HTTP/2, all at once or per chunk, and 404 elsewhere.
func TestTLSFakeAnswers(t *testing.T) {
	_, whole := fakeStream(8)
	for _, perChunk := range []bool{false, true} {
		certFile := filepath.Join(t.TempDir(), "cert.pem")
		fake, err := startTLSFake("127.0.0.1:0", certFile, fakeOptions{chunks: 8, perChunk: perChunk})
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, certFile)}, ForceAttemptHTTP2: true}
		for path, want := range map[string]int{"/v1/chat/completions": 200, "/v1/other": 404} {
			resp, err := (&http.Client{Transport: tr}).Post("https://"+fake.Addr()+path, "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != want || resp.ProtoMajor != 2 {
				t.Fatalf("%s: %s %s, %v", path, resp.Proto, resp.Status, err)
			}
			if want == 200 && string(body) != string(whole) {
				t.Fatalf("answer %q, want %q", body, whole)
			}
		}
		tr.CloseIdleConnections()
		fake.Close()
	}
}

func certPool(t *testing.T, certFile string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in", certFile)
	}
	return pool
}

func mustDriver(t *testing.T, c config) *driver {
	t.Helper()
	d, err := newDriver(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startRuntime serves the hello fixture's runtime, its model a fake (holding its streams open
// with hold); both stop when the test ends.
func startRuntime(t *testing.T, hold bool) *httptest.Server {
	t.Helper()
	fake, err := startFake("127.0.0.1:0", fakeOptions{chunks: 32, hold: hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return serveRuntime(t, "http://"+fake.Addr()+"/v1", nil)
}

// serveRuntime serves the hello fixture's runtime, its model at baseURL reached with client
// (nil: the runtime's own).
func serveRuntime(t *testing.T, baseURL string, client *http.Client) *httptest.Server {
	t.Helper()
	ag, err := agent.LoadDir(agenttest.Dir(t, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_BASE_URL": baseURL}
	rt, err := runtime.New(runtime.Options{Agent: ag, Logger: slog.New(slog.DiscardHandler),
		DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o-mini"},
		Models:       runtime.NewModels(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, client)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(func() {
		srv.Close()
		_ = rt.Close(context.Background())
	})
	return srv
}

// TestFakePerChunk: in per-chunk mode the fake sends the same answer as events of their own,
// with chunked encoding, on a connection that stays usable for the next request.
func TestFakePerChunk(t *testing.T) {
	fake, err := startFake("127.0.0.1:0", fakeOptions{chunks: 8, perChunk: true, delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	_, whole := fakeStream(8)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for range 2 { // the second request reuses the connection
		resp, err := client.Post("http://"+fake.Addr()+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || string(body) != string(whole) {
			t.Fatalf("per-chunk answer: %v %q, want chunked %q", resp.TransferEncoding, body, whole)
		}
	}
}
