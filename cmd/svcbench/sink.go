package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// otlpSink is an OTLP/HTTP trace receiver that reads each export whole and drops it: the
// collector end of a traced runtime under load, in a process of its own so that its CPU is not
// counted as the runtime's.
type otlpSink struct {
	ln           net.Listener
	srv          *http.Server
	posts, bytes atomic.Int64
}

func startOTLPSink(addr string) (*otlpSink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &otlpSink{ln: ln}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		s.posts.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) addr() string { return s.ln.Addr().String() }

func (s *otlpSink) close(log *slog.Logger) {
	_ = s.srv.Close()
	log.Info("OTLP trace sink closed", "exports", s.posts.Load(), "bytes", s.bytes.Load())
}
