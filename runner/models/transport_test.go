package models

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	neturl "net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter is a test server that counts the connections it accepted and closed.
type connCounter struct {
	*httptest.Server
	opened, closed atomic.Int32
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *connCounter {
	t.Helper()
	s := &connCounter{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newTestTransport(t *testing.T) *Transport {
	t.Helper()
	tr := NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func do(t *testing.T, tr http.RoundTripper, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of %s: %v", req.URL, err)
	}
	resp.Body.Close()
	return resp, string(b)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A keep-alive server serves every call over one connection: answers of known length and
// chunked ones, bodies written with the head and bodies larger than that, with the header the
// request carried.
func TestTransportReusesOneConnection(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", fmt.Sprintf("%s %s host=%s len=%d auth=%s ua=%s",
			r.Method, r.URL.RequestURI(), r.Host, r.ContentLength, r.Header.Get("Authorization"), r.UserAgent()))
		if r.URL.Query().Get("chunked") != "" {
			w.Write([]byte("part one "))
			w.(http.Flusher).Flush()
			w.Write(body)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body)
	})
	tr := newTestTransport(t)
	large := strings.Repeat("x", 3*smallBody)
	for i, c := range []struct {
		method, path, body string
		chunked            bool
	}{
		{"GET", "/v1/models", "", false},
		{"POST", "/v1/chat/completions?a=b", `{"model":"m"}`, false},
		{"POST", "/v1/chat/completions?chunked=1", `{"stream":true}`, true},
		{"POST", "/v1/chat/completions", large, false},
		{"POST", "/v1/chat/completions?chunked=1", large, true},
		{"POST", "/v1/empty", "", false},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req, _ := http.NewRequest(c.method, srv.URL+c.path, body)
		req.Header.Set("Authorization", "Bearer k")
		resp, got := do(t, tr, req)
		want := c.body
		if c.chunked {
			want = "part one " + c.body
			if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
				t.Errorf("call %d: transfer encoding %v, want chunked", i, resp.TransferEncoding)
			}
		}
		if got != want {
			t.Errorf("call %d: body of %d bytes, want %d", i, len(got), len(want))
		}
		wantSeen := fmt.Sprintf("%s %s host=%s len=%d auth=Bearer k ua=Go-http-client/1.1",
			c.method, c.path, strings.TrimPrefix(srv.URL, "http://"), len(c.body))
		if seen := resp.Header.Get("X-Seen"); seen != wantSeen {
			t.Errorf("call %d: the server saw %q, want %q", i, seen, wantSeen)
		}
	}
	if n := srv.opened.Load(); n != 1 {
		t.Errorf("%d connections for six calls in a row, want 1", n)
	}
}

// An answer streams: each part reaches the reader as the server flushes it, not at the end.
func TestTransportStreamsTheAnswer(t *testing.T) {
	next := make(chan struct{})
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			<-next
		}
	})
	tr := newTestTransport(t)
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{}
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the last event: %q, %v", rest, err)
	}
}

// An answer with Connection: close, a request with Close, an answer's body closed before its
// end: the connection is not used again.
func TestTransportDoesNotKeepWhatCannotBeReused(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		w.Write(bytes.Repeat([]byte("y"), 64<<10))
	})
	tr := newTestTransport(t)

	req, _ := http.NewRequest("GET", srv.URL+"/close", nil)
	do(t, tr, req)
	req, _ = http.NewRequest("GET", srv.URL+"/", nil)
	req.Close = true
	do(t, tr, req)
	req, _ = http.NewRequest("GET", srv.URL+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 10)); !errors.Is(err, errBodyClosed) {
		t.Errorf("a read after Close: %v, want %v", err, errBodyClosed)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/", nil)
	do(t, tr, req)
	if n := srv.opened.Load(); n != 4 {
		t.Errorf("%d connections, want 4: none of the first three could be reused", n)
	}
	waitUntil(t, "the server to see three connections closed", func() bool { return srv.closed.Load() == 3 })
}

// A client leaving mid-answer (its context canceled with a cause) ends the read with that
// cause and closes the connection; the next call gets a new one.
func TestTransportCancelMidAnswer(t *testing.T) {
	release := make(chan struct{})
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			w.Write([]byte("first"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Write([]byte("ok"))
	})
	defer close(release)
	tr := newTestTransport(t)
	left := errors.New("the client left")
	ctx, cancel := context.WithCancelCause(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/slow", strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel(left)
	}()
	if _, err := resp.Body.Read(buf); !errors.Is(err, left) {
		t.Fatalf("the read waiting when the client left: %v, want %v", err, left)
	}
	resp.Body.Close()
	waitUntil(t, "the server to see the connection closed", func() bool { return srv.closed.Load() == 1 })

	req, _ = http.NewRequest("GET", srv.URL+"/", nil)
	if _, body := do(t, tr, req); body != "ok" {
		t.Fatalf("the next call: %q", body)
	}
	if n := srv.opened.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}

	// Canceled before the call: no connection is dialled.
	req, _ = http.NewRequestWithContext(ctx, "GET", srv.URL+"/", nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, left) {
		t.Fatalf("a call on a canceled context: %v, want %v", err, left)
	}
}

// Timeout bounds a call to the end of its answer, on both paths.
func TestTransportTimeout(t *testing.T) {
	// The answer does not end when the client leaves: a server ending it then could get its
	// last chunk in while Go's TLS client says goodbye (close_notify) before it closes.
	release := make(chan struct{})
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		<-release
	}
	plain := newCountingServer(t, h)
	secure := httptest.NewTLSServer(http.HandlerFunc(h))
	defer secure.Close()
	defer close(release)
	tr := newTestTransport(t)
	tr.HTTPS.TLSClientConfig = &tls.Config{RootCAs: secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	tr.Timeout = 100 * time.Millisecond
	for _, url := range []string{plain.URL, secure.URL} {
		req, _ := http.NewRequest("GET", url, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: the read past the timeout: %v, want %v", url, err, context.DeadlineExceeded)
		}
	}
}

// rawServer answers each connection with serve, on a listener of its own.
func rawServer(t *testing.T, serve func(n int, c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(n, c)
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// readRequest reads one request from br, its body too.
func readRequest(br *bufio.Reader) (*http.Request, string, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(req.Body)
	return req, string(b), err
}

// A server closes an idle connection: the next call finds it closed when it takes it, and
// dials a new one.
func TestTransportIdleConnectionClosedByTheServer(t *testing.T) {
	var served atomic.Int32
	url := rawServer(t, func(n int, c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		served.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// and close, without Connection: close
	})
	tr := newTestTransport(t)
	for i := range 3 {
		req, _ := http.NewRequest("GET", url, nil)
		if _, body := do(t, tr, req); body != "ok" {
			t.Fatalf("call %d: %q", i, body)
		}
		time.Sleep(20 * time.Millisecond) // the server's close arrives
	}
	if n := served.Load(); n != 3 {
		t.Errorf("%d requests served, want 3", n)
	}
}

// A reused connection the server closes on reading the next request (its idle timeout ran out
// as the request went): a request that can be sent again goes once more on a new connection;
// one whose body cannot be read again fails.
func TestTransportRetriesOnceOnAStaleConnection(t *testing.T) {
	var got sync.Map
	url := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			req, body, err := readRequest(br)
			if err != nil {
				return
			}
			got.Store(fmt.Sprintf("%d/%d %s", n, i, req.URL.Path), body)
			if i == 1 {
				return // closes without an answer
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := newTestTransport(t)
	req, _ := http.NewRequest("GET", url+"/a", nil)
	do(t, tr, req)
	req, _ = http.NewRequest("POST", url+"/b", strings.NewReader("again"))
	if _, body := do(t, tr, req); body != "ok" {
		t.Fatalf("the retried call: %q", body)
	}
	for _, k := range []string{"0/0 /a", "0/1 /b", "1/0 /b"} {
		if body, ok := got.Load(k); !ok || k != "0/0 /a" && body != "again" {
			t.Errorf("request %s: %v %q", k, ok, body)
		}
	}

	// Connection 1 served one request and is idle: its next request is closed on.
	req, _ = http.NewRequest("POST", url+"/c", io.NopCloser(strings.NewReader("once")))
	req.ContentLength = 4
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a call whose body cannot be sent again succeeded on a connection closed under it")
	}
}

// A chunked answer read through the transport's own decoder: the connection serves the next
// call once the body has ended; a server that sent bytes past the end (with the head, or after
// it) does not get the connection again, and a malformed body fails the read.
func TestTransportChunkedAnswers(t *testing.T) {
	answers := []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nextra",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX",
	}
	var conns atomic.Int32
	var next atomic.Int32
	url := rawServer(t, func(n int, c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			a := answers[next.Add(1)-1]
			if i := strings.Index(a, "\r\n\r\n"); strings.HasSuffix(a, "extra") {
				io.WriteString(c, a[:i+4]) // the head alone, then the body with what follows it
				time.Sleep(10 * time.Millisecond)
				a = a[i+4:]
			}
			io.WriteString(c, a)
		}
	})
	tr := newTestTransport(t)
	for i, want := range []string{"hello", "abc", "ok", "ok"} {
		req, _ := http.NewRequest("GET", url, nil)
		if _, body := do(t, tr, req); body != want {
			t.Fatalf("call %d: %q, want %q", i, body, want)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the third answer's extra bytes cost its connection)", n)
	}
	req, _ := http.NewRequest("GET", url, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); !errors.Is(err, errMalformedChunk) {
		t.Errorf("a malformed body read as %q, %v; want %v", b, err, errMalformedChunk)
	}
}

// An informational answer before the real one is skipped; a switch of protocols is refused.
func TestTransportInformationalAnswers(t *testing.T) {
	url := rawServer(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/upgrade" {
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				return
			}
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
		}
	})
	tr := newTestTransport(t)
	req, _ := http.NewRequest("GET", url+"/", nil)
	if resp, body := do(t, tr, req); resp.StatusCode != 200 || body != "real" {
		t.Fatalf("%d %q, want 200 real", resp.StatusCode, body)
	}
	req, _ = http.NewRequest("GET", url+"/upgrade", nil)
	if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "switched protocols") {
		t.Fatalf("a 101: %v", err)
	}
}

// HTTPS, a request through a proxy, and a body of unknown length go through Go's transport.
func TestTransportHandsOnWhatItDoesNotSpeak(t *testing.T) {
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s tls", r.Proto)
	}))
	defer secure.Close()
	var proxied atomic.Value
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.RequestURI)
		w.Write([]byte("via proxy"))
	}))
	defer proxy.Close()
	plain := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%v", r.TransferEncoding)
	})

	tr := newTestTransport(t)
	tr.HTTPS.TLSClientConfig = &tls.Config{RootCAs: secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	req, _ := http.NewRequest("GET", secure.URL, nil)
	if resp, body := do(t, tr, req); resp.TLS == nil || body != "HTTP/1.1 tls" {
		t.Errorf("https: %q (tls %v)", body, resp.TLS != nil)
	}

	req, _ = http.NewRequest("POST", plain.URL, io.NopCloser(strings.NewReader("of unknown length")))
	if _, body := do(t, tr, req); body != "[chunked]" {
		t.Errorf("a body of unknown length went as %q, want chunked", body)
	}

	tr.HTTPS.Proxy = func(*http.Request) (*neturl.URL, error) { return neturl.Parse(proxy.URL) }
	req, _ = http.NewRequest("GET", plain.URL+"/through", nil)
	if _, body := do(t, tr, req); body != "via proxy" || proxied.Load() != plain.URL+"/through" {
		t.Errorf("with a proxy: %q, the proxy saw %v", body, proxied.Load())
	}
	if n := plain.opened.Load(); n != 1 {
		t.Errorf("the plain server saw %d connections, want 1 (the chunked upload)", n)
	}
}

// A header that would split the request is refused before any connection is made.
func TestTransportRefusesAnInvalidHeader(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tr := newTestTransport(t)
	for _, set := range []func(*http.Request){
		func(r *http.Request) { r.Header["X-Key"] = []string{"a\r\nX-Evil: 1"} },
		func(r *http.Request) { r.Header["Bad Name"] = []string{"v"} },
		func(r *http.Request) { r.Host = "h\nX: y" },
	} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("{}"))
		set(req)
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid") {
			t.Errorf("an invalid header: %v", err)
		}
	}
	if n := srv.opened.Load(); n != 0 {
		t.Errorf("%d connections for refused requests", n)
	}
}

// WroteRequest is reported once the request is on the wire (the OpenAI provider lets go of
// the request body on it).
func TestTransportReportsTheWrittenRequest(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	tr := newTestTransport(t)
	var wrote atomic.Int32
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Add(1)
			}
		},
	})
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader("{}"))
	do(t, tr, req)
	if n := wrote.Load(); n != 1 {
		t.Errorf("WroteRequest reported %d times, want 1", n)
	}
}

// Idle connections beyond the pool's size are closed, and the rest once idle too long; no
// goroutine stays behind once the answers are read and the pool is closed.
func TestTransportPoolLimits(t *testing.T) {
	release := make(chan struct{})
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a"))
		w.(http.Flusher).Flush()
		<-release
	})
	before := runtime.NumGoroutine()
	tr := NewTransport()
	tr.maxIdlePerHost = 2
	tr.idleTimeout = 100 * time.Millisecond
	var bodies []io.ReadCloser
	for range 4 {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
	}
	close(release)
	for _, b := range bodies {
		io.ReadAll(b)
		b.Close()
	}
	if n := srv.opened.Load(); n != 4 {
		t.Fatalf("%d connections for four calls at once", n)
	}
	waitUntil(t, "two connections beyond the pool closed", func() bool { return srv.closed.Load() >= 2 })
	tr.mu.Lock()
	idle := len(tr.idle[strings.TrimPrefix(srv.URL, "http://")])
	tr.mu.Unlock()
	if idle > 2 {
		t.Errorf("%d idle connections, the pool holds 2", idle)
	}
	waitUntil(t, "the idle connections to expire", func() bool { return srv.closed.Load() == 4 })
	tr.CloseIdleConnections()
	waitUntil(t, "the goroutines of the calls to end", func() bool { return runtime.NumGoroutine() <= before })
}
