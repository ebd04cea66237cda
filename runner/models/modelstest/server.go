package modelstest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Turn scripts one answer of a fake model server. Streams carry, in order: the reasoning
// chunks, the text chunks, the tool calls (each call's arguments split across several
// chunks), then the end of the message with its usage.
type Turn struct {
	Reasoning []string // reasoning chunks (OpenAI: a delta field, see ReasoningField; Anthropic: a thinking block)
	Text      []string // answer text chunks
	ToolCalls []ToolCall
	// Interleave streams the argument pieces of the tool calls round-robin, as a server
	// producing parallel calls at once could (OpenAI only; Anthropic blocks are sequential).
	Interleave bool
	Usage      Usage
	// StopReason overrides the finish reason ("stop"/"tool_calls" for OpenAI,
	// "end_turn"/"tool_use" for Anthropic by default).
	StopReason string
	// ReasoningField is the OpenAI delta field of reasoning: "reasoning_content" (default) or
	// "reasoning".
	ReasoningField string
	// Signature is the Anthropic signature of the thinking block ("sig" by default).
	Signature string

	// Status, when not 0, answers this HTTP status with an error body and no stream.
	Status int
	// ErrorMessage is the message of the error body (of Status or StreamError).
	ErrorMessage string
	// StreamError, when set, ends the stream after the content with an error event of this
	// type (such as "server_error" or "overloaded_error") instead of finishing it.
	StreamError string
	// Header holds extra response headers, such as Retry-After.
	Header map[string]string

	// Delay is waited before each streamed event.
	Delay time.Duration
	// Hang keeps the stream open after the content, before its end, until the client leaves
	// (for cancellation tests).
	Hang bool
}

// ToolCall is one scripted tool call; Arguments is JSON text.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Usage is the token count a turn reports. InputTokens counts every prompt token, CachedTokens
// included (the Anthropic server reports input_tokens = InputTokens - CachedTokens).
type Usage struct {
	InputTokens  int
	OutputTokens int
	CachedTokens int
}

// Request is one request the server received.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
	JSON   map[string]any // Body decoded; nil when it is not a JSON object
}

// Server is a fake model API on 127.0.0.1 that plays a script of turns, one per request,
// repeating the last one when the script is exhausted. It closes itself when the test ends.
type Server struct {
	// URL is the base URL to configure the provider with (for OpenAI it ends in /v1).
	URL string

	srv    *httptest.Server
	done   chan struct{} // closed at cleanup: releases hanging and delayed streams
	write  func(w *eventWriter, t *Turn, req map[string]any)
	errFn  func(t *Turn) []byte
	bench  []byte // a precomputed answer to every request (bench mode)
	mu     sync.Mutex
	script []Turn
	calls  int
	reqs   []Request
}

// newServer starts a server playing script with the given wire format.
func newServer(t testing.TB, script []Turn, path string, write func(*eventWriter, *Turn, map[string]any), errBody func(*Turn) []byte) *Server {
	t.Helper()
	if len(script) == 0 {
		script = []Turn{{Text: []string{"ok"}}}
	}
	s := &Server{done: make(chan struct{}), write: write, errFn: errBody, script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + path
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
	return s
}

// newBenchServer starts a server answering every request with payload, an SSE stream.
func newBenchServer(t testing.TB, path string, payload []byte) *Server {
	t.Helper()
	s := &Server{done: make(chan struct{}), bench: payload}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveBench))
	s.URL = s.srv.URL + path
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
	return s
}

// serveBench answers with the precomputed stream.
func (s *Server) serveBench(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Content-Length"] = []string{strconv.Itoa(len(s.bench))}
	_, _ = w.Write(s.bench) // the client may have left; nothing to do about it
}

// Client returns an HTTP client for the server whose idle connections close with it.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Calls returns how many requests the server received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// serve answers one request with the next turn.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var decoded map[string]any
	if json.Unmarshal(body, &decoded) != nil {
		decoded = nil
	}
	s.mu.Lock()
	turn := s.script[min(s.calls, len(s.script)-1)]
	s.calls++
	s.reqs = append(s.reqs, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, JSON: decoded})
	s.mu.Unlock()

	for k, v := range turn.Header {
		w.Header().Set(k, v)
	}
	if turn.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(turn.Status)
		_, _ = w.Write(s.errFn(&turn)) // the client may have left; nothing to do about it
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	ew := &eventWriter{w: w, r: r, done: s.done, delay: turn.Delay}
	s.write(ew, &turn, decoded)
}

// eventWriter writes SSE events, flushing each, and stops writing once the client left.
type eventWriter struct {
	w      http.ResponseWriter
	r      *http.Request
	done   <-chan struct{}
	delay  time.Duration
	failed bool
	buf    bytes.Buffer
}

// event writes one event; name may be empty (OpenAI). data is marshalled unless it is []byte.
func (e *eventWriter) event(name string, data any) {
	if e.failed || !e.wait(e.delay) {
		e.failed = true
		return
	}
	e.buf.Reset()
	if name != "" {
		e.buf.WriteString("event: ")
		e.buf.WriteString(name)
		e.buf.WriteByte('\n')
	}
	e.buf.WriteString("data: ")
	switch d := data.(type) {
	case []byte:
		e.buf.Write(d)
	default:
		b, err := json.Marshal(d)
		if err != nil {
			panic("modelstest: marshal event: " + err.Error()) // our own values: a bug
		}
		e.buf.Write(b)
	}
	e.buf.WriteString("\n\n")
	if _, err := e.w.Write(e.buf.Bytes()); err != nil {
		e.failed = true
		return
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// wait pauses for d; it reports false when the client left or the server is closing.
func (e *eventWriter) wait(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-e.r.Context().Done():
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-e.r.Context().Done():
		return false
	case <-e.done:
		return false
	}
}

// hang blocks until the client leaves or the server closes.
func (e *eventWriter) hang() {
	select {
	case <-e.r.Context().Done():
	case <-e.done:
	}
	e.failed = true
}

// splitArgs cuts JSON text into at least two pieces (when it has two runes) at rune
// boundaries, so that clients must assemble it.
func splitArgs(s string) []string {
	n := utf8.RuneCountInString(s)
	if n < 2 {
		return []string{s}
	}
	size := max(1, n/3)
	var pieces []string
	start, runes := 0, 0
	for i := range s {
		if runes > 0 && runes%size == 0 {
			pieces = append(pieces, s[start:i])
			start = i
		}
		runes++
	}
	return append(pieces, s[start:])
}
