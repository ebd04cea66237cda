package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingClient is a net/http client that counts the connections it dials.
func countingClient(dials *atomic.Int64) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}}
}

func startTestFake(t *testing.T, hold bool) *fakeServer {
	t.Helper()
	f, err := startFake("127.0.0.1:0", fakeOptions{chunks: 4, hold: hold})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// do sends one request and returns the response with its whole body.
func do(t *testing.T, c *http.Client, method, url string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestFakeServesNetHTTPClient(t *testing.T) {
	f := startTestFake(t, false)
	defer f.Close()
	var dials atomic.Int64
	c := countingClient(&dials)
	defer c.CloseIdleConnections()
	base := "http://" + f.Addr()
	_, all := fakeStream(4)

	for i := range 2 {
		resp, b := do(t, c, "POST", base+"/v1/chat/completions", strings.NewReader(`{"model":"bench"}`))
		if resp.StatusCode != 200 || !bytes.Equal(b, all) || resp.ContentLength != int64(len(all)) {
			t.Fatalf("request %d: status %d, length %d, body %q", i, resp.StatusCode, resp.ContentLength, b)
		}
		if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "text/event-stream" || cc != "no-cache" {
			t.Errorf("headers: Content-Type %q, Cache-Control %q", ct, cc)
		}
	}
	// A chunked request body (unknown length) of many chunks, then one more request on the same connection.
	big := strings.Repeat("x", 100<<10)
	resp, b := do(t, c, "POST", base+"/v1/chat/completions?stream=1", io.MultiReader(strings.NewReader(big), strings.NewReader(big)))
	if resp.StatusCode != 200 || !bytes.Equal(b, all) {
		t.Fatalf("chunked body: status %d, body %q", resp.StatusCode, b)
	}
	for _, r := range []struct{ method, path string }{{"POST", "/v1/other"}, {"GET", "/v1/chat/completions"}} {
		resp, b := do(t, c, r.method, base+r.path, nil)
		if resp.StatusCode != 404 || string(b) != "404 page not found\n" {
			t.Errorf("%s %s: status %d, body %q", r.method, r.path, resp.StatusCode, b)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for 5 requests, want 1 kept alive", n)
	}
}

// rawExchange writes req on a new connection, ends its writing half, and reads until the
// server closes it.
func rawExchange(t *testing.T, addr, req string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn) // ends when the fake closes the connection
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFakeClosesConnections(t *testing.T) {
	f := startTestFake(t, false)
	defer f.Close()
	_, all := fakeStream(4)
	for name, req := range map[string]string{
		"garbage":           "NONSENSE\r\n\r\n",
		"bad version":       "POST /v1/chat/completions HTTP/2.0\r\n\r\n",
		"bad header":        "POST /v1/chat/completions HTTP/1.1\r\nno colon\r\n\r\n",
		"bad length":        "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n",
		"bad chunk":         "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"unknown encoding":  "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		"truncated headers": "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
	} {
		if got := rawExchange(t, f.Addr(), req); !strings.HasPrefix(got, "HTTP/1.1 400 Bad Request\r\n") {
			t.Errorf("%s: %q", name, got)
		}
	}
	// Connection: close (in any case) gets the answer, then the end of the connection.
	got := rawExchange(t, f.Addr(), "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nCONTENT-LENGTH: 2\r\nconnection: Close\r\n\r\n{}")
	if !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(got, "\r\n\r\n"+string(all)) || !strings.Contains(got, "Connection: close\r\n") {
		t.Errorf("Connection: close: %q", got)
	}
	// So does HTTP/1.0 without keep-alive.
	if got := rawExchange(t, f.Addr(), "POST /v1/chat/completions HTTP/1.0\r\n\r\n"); !strings.HasSuffix(got, string(all)) {
		t.Errorf("HTTP/1.0: %q", got)
	}
}

// waitFor polls cond until it holds; the test's own deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 3000 {
			t.Fatalf("still not %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFakeHold(t *testing.T) {
	before := runtime.NumGoroutine()
	f := startTestFake(t, true)
	head, _ := fakeStream(4)
	c := &http.Client{Transport: &http.Transport{}}
	open := func() *http.Response {
		resp, err := c.Post("http://"+f.Addr()+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(head))
		if _, err := io.ReadFull(resp.Body, got); err != nil || !bytes.Equal(got, head) {
			t.Fatalf("head %q, %v", got, err)
		}
		if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("header %v, transfer encoding %v", resp.Header, resp.TransferEncoding)
		}
		return resp
	}
	// The stream stays open until the client leaves.
	resp := open()
	if n := f.openConns(); n != 1 {
		t.Fatalf("%d connections open, want 1", n)
	}
	_ = resp.Body.Close() // unread: the transport closes the connection
	waitFor(t, "closed by the fake after the client left", func() bool { return f.openConns() == 0 })

	// Close ends open streams and every goroutine of the fake.
	resp = open()
	f.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("stream ended cleanly at Close, want an error (no last chunk)")
	}
	_ = resp.Body.Close()
	c.CloseIdleConnections()
	waitFor(t, "back to the goroutines before the fake", func() bool { return runtime.NumGoroutine() <= before })
}

// sseRuntime is a stand-in for the runtime's /chat/stream: it checks the request and answers
// init, one text_delta and done, framed by frame.
func sseRuntime(t *testing.T, frame func(w http.ResponseWriter, r *http.Request, frames []string)) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != "POST" || r.URL.Path != "/base/chat/stream" || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("Authorization") != "Bearer tok" || !bytes.HasPrefix(body, []byte(`{"message":"hi`)) {
			t.Errorf("request %s %s %v %s", r.Method, r.URL, r.Header, body)
		}
		if bytes.Contains(body, []byte("refuse")) {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		frame(w, r, []string{
			`data: {"type":"init","session_id":"s1"}` + "\n\n",
			`data: {"type":"text_delta","text":"tok "}` + "\n\n",
			`data: {"type":"done"}` + "\n\n",
		})
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	return srv, &conns
}

func TestClientFramings(t *testing.T) {
	for name, tc := range map[string]struct {
		frame func(w http.ResponseWriter, r *http.Request, frames []string)
		conns int64
	}{
		"chunked": {conns: 1, frame: func(w http.ResponseWriter, r *http.Request, frames []string) {
			for _, f := range frames {
				_, _ = io.WriteString(w, f)
				w.(http.Flusher).Flush()
			}
		}},
		"content-length": {conns: 1, frame: func(w http.ResponseWriter, r *http.Request, frames []string) {
			all := strings.Join(frames, "")
			w.Header().Set("Content-Length", fmt.Sprint(len(all)))
			_, _ = io.WriteString(w, all)
		}},
		"connection close": {conns: 2, frame: func(w http.ResponseWriter, r *http.Request, frames []string) {
			w.Header().Set("Connection", "close")
			for _, f := range frames {
				_, _ = io.WriteString(w, f)
				w.(http.Flusher).Flush()
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			srv, conns := sseRuntime(t, tc.frame)
			defer srv.Close()
			d := mustDriver(t, config{url: srv.URL + "/base", token: "tok", message: "hi"})
			cl := d.newClient(context.Background(), 16<<10)
			defer cl.Close()
			session := ""
			for i := range 2 {
				var res turnResult
				session, res = d.turn(cl, session)
				if res.err != nil || res.ttfd <= 0 || session != "s1" {
					t.Fatalf("turn %d: session %q, %+v", i, session, res)
				}
			}
			if n := conns.Load(); n != tc.conns {
				t.Errorf("%d connections for 2 turns, want %d", n, tc.conns)
			}
		})
	}
}

func TestClientRefused(t *testing.T) {
	srv, conns := sseRuntime(t, func(w http.ResponseWriter, _ *http.Request, frames []string) {
		_, _ = io.WriteString(w, strings.Join(frames, ""))
	})
	defer srv.Close()
	d := mustDriver(t, config{url: srv.URL + "/base", token: "tok", message: "hi"})
	bad := mustDriver(t, config{url: srv.URL + "/base", token: "tok", message: "hi, refuse"})
	cl := d.newClient(context.Background(), 16<<10)
	defer cl.Close()
	if _, res := bad.turn(cl, ""); res.err == nil || res.err.Error() != "status 503: overloaded\n" {
		t.Fatalf("refused turn: %v", res.err)
	}
	// The same client redials after the refusal.
	if session, res := d.turn(cl, ""); res.err != nil || session != "s1" {
		t.Fatalf("turn after a refusal: %q, %v", session, res.err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestClientToEOF talks to a server that answers each connection's one request with a body
// that ends at the end of the connection, and without Connection: close.
func TestClientToEOF(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(conn)
			if _, err := http.ReadRequest(br); err == nil {
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"+
					`data: {"type":"init","session_id":"s1"}`+"\n\n"+`data: {"type":"text_delta"}`+"\n\n"+`data: {"type":"done"}`+"\n\n")
			}
			_ = conn.Close()
		}
	})
	d := mustDriver(t, config{url: "http://" + ln.Addr().String(), message: "hi"})
	cl := d.newClient(context.Background(), 16<<10)
	defer cl.Close()
	for i := range 3 {
		if session, res := d.turn(cl, ""); res.err != nil || session != "s1" || res.ttfd <= 0 {
			t.Fatalf("turn %d: %q, %+v", i, session, res)
		}
	}
}

// TestClientCancel ends a turn whose stream never ends when the client's context ends.
func TestClientCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, _ := sseRuntime(t, func(w http.ResponseWriter, r *http.Request, frames []string) {
		_, _ = io.WriteString(w, frames[0])
		w.(http.Flusher).Flush()
		cancel()
		<-r.Context().Done() // until the client leaves
	})
	defer srv.Close()
	d := mustDriver(t, config{url: srv.URL + "/base", token: "tok", message: "hi"})
	cl := d.newClient(ctx, 16<<10)
	defer cl.Close()
	if _, res := d.turn(cl, ""); res.err == nil {
		t.Fatal("turn outlived its context")
	}
	if _, res := d.turn(cl, ""); res.err == nil {
		t.Fatal("turn after the context ended")
	}
}

// BenchmarkClientTurn runs turns against a server that answers every request with the same
// chunked SSE stream: the client's cost per turn, without a runtime's.
func BenchmarkClientTurn(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	var answer []byte
	answer = append(answer, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"...)
	for _, f := range []string{`data: {"type":"init","session_id":"s1"}` + "\n\n", `data: {"type":"text_delta","text":"tok "}` + "\n\n", `data: {"type":"done"}` + "\n\n"} {
		answer = fmt.Appendf(answer, "%x\r\n%s\r\n", len(f), f)
	}
	answer = append(answer, "0\r\n\r\n"...)
	wg.Go(func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		var body bodyReader
		for {
			if _, err := br.ReadSlice('\n'); err != nil {
				return
			}
			h, err := readHeaders(br)
			if err != nil {
				return
			}
			body.reset(br, h, false)
			if body.discard() != nil {
				return
			}
			if _, err := conn.Write(answer); err != nil {
				return
			}
		}
	})
	d, err := newDriver(config{url: "http://" + ln.Addr().String(), message: "hi"})
	if err != nil {
		b.Fatal(err)
	}
	cl := d.newClient(context.Background(), 16<<10)
	defer cl.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, res := d.turn(cl, "s1"); res.err != nil {
			b.Fatal(res.err)
		}
	}
}

// BenchmarkFakeRequest sends requests to the fake and reads its answers: the fake's cost per
// request and the client's.
func BenchmarkFakeRequest(b *testing.B) {
	f, err := startFake("127.0.0.1:0", fakeOptions{chunks: 32})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	conn, err := net.Dial("tcp", f.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	req := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"model\":\"bench\"}")
	answer := len(f.stream[0])
	buf := make([]byte, answer)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			b.Fatal(err)
		}
	}
}
