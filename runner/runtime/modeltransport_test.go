package runtime_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"svc/runner/runtime"
)

// The model transport speaks HTTP/2 to a provider that offers it by ALPN and HTTP/1.1 to one
// that does not; past the server's stream limit it opens another connection instead of making
// the streams wait, so held streams beyond the limit all get their answer's head.
func TestModelTransportHTTP2(t *testing.T) {
	const limit, streams = 2, 5
	release := make(chan struct{})
	var mu sync.Mutex
	conns := map[string]bool{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		w.Header().Set("X-Proto", r.Proto)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "data: a\n\n")
		http.NewResponseController(w).Flush()
		if r.URL.Path == "/hold" {
			<-release
		}
	})
	h2 := httptest.NewUnstartedServer(h)
	h2.EnableHTTP2 = true
	h2.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: limit}
	h2.StartTLS()
	defer h2.Close()
	h1 := httptest.NewTLSServer(h)
	defer h1.Close()

	tr := runtime.ModelTransport()
	tr.HTTPS.TLSClientConfig = &tls.Config{RootCAs: h2.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for _, c := range []struct {
		url   string
		proto string
	}{{h2.URL, "HTTP/2.0"}, {h1.URL, "HTTP/1.1"}} {
		resp, err := client.Get(c.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Proto != c.proto {
			t.Errorf("%s: %s, want %s", c.url, resp.Proto, c.proto)
		}
	}

	mu.Lock()
	clear(conns)
	mu.Unlock()
	var bodies []io.ReadCloser
	defer func() {
		close(release)
		for _, b := range bodies {
			_, _ = io.Copy(io.Discard, b)
			b.Close()
		}
	}()
	for range streams { // each returns with the head while the handler still holds the stream
		resp, err := client.Get(h2.URL + "/hold")
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("held stream over %s", resp.Proto)
		}
	}
	mu.Lock()
	n := len(conns)
	mu.Unlock()
	if want := (streams + limit - 1) / limit; n != want {
		t.Errorf("%d held streams over %d connections, want %d (limit %d a connection)", streams, n, want, limit)
	}
}
