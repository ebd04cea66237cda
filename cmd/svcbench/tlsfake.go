package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// tlsFake is the fake OpenAI API over TLS, HTTP/2 offered by ALPN (HTTP/1.1 to a client that
// does not ask for h2), as the real model APIs serve: the answers of fakeServer, written by
// net/http's server. Its certificate is self-signed for the listen address and written to a
// file that the runtime is told to trust (SSL_CERT_FILE).
type tlsFake struct {
	srv    *http.Server
	ln     net.Listener
	o      fakeOptions
	head   []byte   // with hold: the first two events
	all    []byte   // the whole answer
	events [][]byte // per chunk: each SSE event
	wg     sync.WaitGroup
	h2, h1 atomic.Int64 // requests served over HTTP/2 and HTTP/1.x
	mu     sync.Mutex
	used   map[string]bool // the client addresses of the connections that carried requests
}

// fakeModel is what the benchmark needs of either fake.
type fakeModel interface {
	Addr() string
	Close()
}

// h2MaxStreams is the fake's SETTINGS_MAX_CONCURRENT_STREAMS: Go's default, near what the
// providers' front ends advertise (100 to 256). The runtime's client opens another connection
// when a connection has this many streams.
const h2MaxStreams = 250

// startTLSFake serves the fake on addr over TLS and writes its certificate (PEM) to certFile.
func startTLSFake(addr, certFile string, o fakeOptions) (*tlsFake, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	cert, err := selfSigned(ln.Addr().(*net.TCPAddr).IP, certFile)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	f := &tlsFake{ln: ln, o: o, used: map[string]bool{}}
	f.head, f.all = fakeStream(o.chunks)
	for _, ev := range bytes.SplitAfter(f.all, []byte("\n\n")) {
		if len(ev) > 0 {
			f.events = append(f.events, ev)
		}
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	f.srv = &http.Server{
		Handler:           f,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		Protocols:         &protos,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: h2MaxStreams},
		ReadHeaderTimeout: 10 * time.Second,
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		_ = f.srv.ServeTLS(ln, "", "")
	}()
	return f, nil
}

// Addr is the address the fake listens on.
func (f *tlsFake) Addr() string { return f.ln.Addr().String() }

// Close closes the listener and every connection, and waits for the handlers (a held stream
// ends when its connection closes).
func (f *tlsFake) Close() {
	_ = f.srv.Close()
	f.wg.Wait()
}

// ServeHTTP answers POST /v1/chat/completions with the fake's stream, anything else 404.
func (f *tlsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.wg.Add(1)
	defer f.wg.Done()
	if r.ProtoMajor == 2 {
		f.h2.Add(1)
	} else {
		f.h1.Add(1)
	}
	f.mu.Lock()
	f.used[r.RemoteAddr] = true
	f.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	flush := http.NewResponseController(w).Flush
	switch {
	case f.o.hold:
		if _, err := w.Write(f.head); err == nil && flush() == nil {
			<-r.Context().Done() // until the client leaves or Close
		}
	case f.o.perChunk:
		for i, ev := range f.events {
			if i > 0 && f.o.delay > 0 {
				time.Sleep(f.o.delay)
			}
			if _, err := w.Write(ev); err != nil || flush() != nil {
				return
			}
		}
	default:
		_, _ = w.Write(f.all)
	}
}

// selfSigned makes a self-signed certificate for ip (and localhost), valid for a day, and
// writes it to certFile as PEM.
func selfSigned(ip net.IP, certFile string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "svcbench fake model"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{ip},
		DNSNames:              []string{"localhost"},
	}
	if ip.IsUnspecified() {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if certFile == "" {
		return tls.Certificate{}, errors.New("no file to write the certificate to")
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// stats reports the requests served over HTTP/2 and HTTP/1.x, and the connections that carried
// them (the client's HTTP/2 pool closes a connection it dialled and did not need unused).
func (f *tlsFake) stats() (h2, h1 int64, conns int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.h2.Load(), f.h1.Load(), len(f.used)
}
