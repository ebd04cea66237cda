package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// fakeServer is a fake OpenAI Chat Completions API for load tests: every request gets the same
// precomputed stream of chunks "tok " and a usage chunk, by default written at once with no
// delay; with perChunk each event is written on its own (chunked encoding, one write each), as a
// real model API sends them, with delay between them. It speaks just enough HTTP/1.1 on raw TCP
// to stay cheap next to the runtime it feeds.
type fakeServer struct {
	ln       net.Listener
	stream   [2][]byte // the whole answer; [1] with Connection: close
	notFound [2][]byte
	holdHead []byte // with hold: the header and the head as one chunk
	hold     bool

	perChunk    bool
	delay       time.Duration
	chunkedHead [2][]byte // per chunk: the response header; [1] with Connection: close
	events      [][]byte  // per chunk: each SSE event framed as one chunk, then the last chunk

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Addr is the address the fake listens on.
func (f *fakeServer) Addr() string { return f.ln.Addr().String() }

// Close stops the fake, closes its connections and open streams, and waits for them.
func (f *fakeServer) Close() {
	f.mu.Lock()
	f.closed = true
	_ = f.ln.Close()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// fakeOptions shape the fake's answers.
type fakeOptions struct {
	chunks   int           // text chunks per answer
	hold     bool          // after the first chunk, hold each stream open until the client leaves
	perChunk bool          // write each event on its own
	delay    time.Duration // with perChunk: the pause before each event after the first
}

func startFake(addr string, o fakeOptions) (*fakeServer, error) {
	head, all := fakeStream(o.chunks)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	const sse = "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
	f := &fakeServer{ln: ln, hold: o.hold, perChunk: o.perChunk, delay: o.delay, conns: map[net.Conn]struct{}{}}
	for i, conn := range []string{"", "Connection: close\r\n"} {
		f.stream[i] = httpResponse("200 OK", sse+conn, all)
		f.notFound[i] = httpResponse("404 Not Found", "Content-Type: text/plain; charset=utf-8\r\n"+conn, []byte("404 page not found\n"))
		f.chunkedHead[i] = fmt.Appendf(nil, "HTTP/1.1 200 OK\r\n%s%sTransfer-Encoding: chunked\r\n\r\n", sse, conn)
	}
	for _, ev := range bytes.SplitAfter(all, []byte("\n\n")) {
		if len(ev) > 0 {
			f.events = append(f.events, fmt.Appendf(nil, "%x\r\n%s\r\n", len(ev), ev))
		}
	}
	f.events = append(f.events, []byte("0\r\n\r\n"))
	f.holdHead = fmt.Appendf(nil, "HTTP/1.1 200 OK\r\n%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", sse, len(head), head)
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

var fakeBadRequest = httpResponse("400 Bad Request", "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n", []byte("400 Bad Request\n"))

// httpResponse is a whole response framed with Content-Length; header lines end in CRLF.
func httpResponse(status, header string, body []byte) []byte {
	b := fmt.Appendf(nil, "HTTP/1.1 %s\r\n%sContent-Length: %d\r\n\r\n", status, header, len(body))
	return append(b, body...)
}

func (f *fakeServer) accept() {
	defer f.wg.Done()
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // such as too many open files: wait as net/http does
			continue
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			_ = conn.Close()
			return
		}
		f.conns[conn] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(conn)
	}
}

// openConns is the number of connections being served.
func (f *fakeServer) openConns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// serve answers the requests of one connection in turn.
func (f *fakeServer) serve(conn net.Conn) {
	defer func() {
		_ = conn.Close()
		f.mu.Lock()
		delete(f.conns, conn)
		f.mu.Unlock()
		f.wg.Done()
	}()
	br := bufio.NewReaderSize(conn, 4<<10)
	var body bodyReader
	for {
		stream, closeAfter, err := f.readRequest(br, &body)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				_, _ = conn.Write(fakeBadRequest)
			}
			return
		}
		var answer []byte
		switch {
		case stream && f.hold:
			if _, err := conn.Write(f.holdHead); err == nil {
				_, _ = io.Copy(io.Discard, br) // until the client leaves or Close
			}
			return
		case stream && f.perChunk:
			if err := f.writeEvents(conn, closeAfter); err != nil || closeAfter {
				return
			}
			continue
		case stream:
			answer = f.stream[b2i(closeAfter)]
		default:
			answer = f.notFound[b2i(closeAfter)]
		}
		if _, err := conn.Write(answer); err != nil || closeAfter {
			return
		}
	}
}

// writeEvents writes a per-chunk answer: the header with the first event, then every other event
// in a write of its own, after the delay.
func (f *fakeServer) writeEvents(conn net.Conn, closeAfter bool) error {
	first := append(append([]byte(nil), f.chunkedHead[b2i(closeAfter)]...), f.events[0]...)
	if _, err := conn.Write(first); err != nil {
		return err
	}
	for _, ev := range f.events[1:] {
		if f.delay > 0 && len(ev) > 5 { // not before the last, empty chunk
			time.Sleep(f.delay)
		}
		if _, err := conn.Write(ev); err != nil {
			return err
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var errBadRequest = errors.New("bad request")

// readRequest reads one request and discards its body. stream reports POST
// /v1/chat/completions; io.EOF means the client left between requests.
func (f *fakeServer) readRequest(br *bufio.Reader, body *bodyReader) (stream, closeAfter bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if len(line) == 0 && !errors.Is(err, bufio.ErrBufferFull) {
			return false, false, io.EOF
		}
		return false, false, errBadRequest
	}
	// METHOD SP TARGET SP HTTP/1.x
	line = trimEOL(line)
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(rest, []byte(" "))
	http10 := bytes.Equal(proto, []byte("HTTP/1.0"))
	if !ok1 || !ok2 || len(method) == 0 || len(target) == 0 || !http10 && !bytes.Equal(proto, []byte("HTTP/1.1")) {
		return false, false, errBadRequest
	}
	path, _, _ := bytes.Cut(target, []byte("?"))
	stream = bytes.Equal(method, []byte("POST")) && bytes.Equal(path, []byte("/v1/chat/completions")) // line is br's until the next read
	h, err := readHeaders(br)
	if err != nil {
		return false, false, errBadRequest
	}
	body.reset(br, h, false)
	if err := body.discard(); err != nil {
		return false, false, errBadRequest
	}
	return stream, h.close || http10 && !h.keep, nil
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
