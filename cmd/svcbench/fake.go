package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"time"
)

// fakeServer is a fake OpenAI Chat Completions API for load tests: every request gets the same
// precomputed stream of chunks "tok " and a usage chunk, written at once with no delay.
type fakeServer struct {
	srv *http.Server
	ln  net.Listener
}

// Addr is the address the fake listens on.
func (f *fakeServer) Addr() string { return f.ln.Addr().String() }

// Close stops the fake and its open streams.
func (f *fakeServer) Close() { _ = f.srv.Close() }

func startFake(addr string, chunks int, hold bool) (*fakeServer, error) {
	head, all := fakeStream(chunks)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		if hold {
			_, _ = w.Write(head) // a client that left ends the request
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
			return
		}
		_, _ = w.Write(all)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with Close
	return &fakeServer{srv: srv, ln: ln}, nil
}

// fakeStream returns the first two chunks (role, first text) and the whole stream.
func fakeStream(chunks int) (head, all []byte) {
	var b strings.Builder
	line := func(v any) {
		data, err := json.Marshal(v)
		if err != nil {
			panic(err) // plain data always marshals
		}
		b.WriteString("data: ")
		b.Write(data)
		b.WriteString("\n\n")
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000, "model": "bench",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	line(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	line(chunk(map[string]any{"content": "tok "}, nil))
	head = []byte(b.String())
	for range chunks - 1 {
		line(chunk(map[string]any{"content": "tok "}, nil))
	}
	line(chunk(map[string]any{}, "stop"))
	line(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000, "model": "bench", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 12, "completion_tokens": chunks, "total_tokens": 12 + chunks},
	})
	b.WriteString("data: [DONE]\n\n")
	return head, []byte(b.String())
}
