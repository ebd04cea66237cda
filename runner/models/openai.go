package models

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OpenAIConfig configures an OpenAI Chat Completions provider. Zero values are defaults.
type OpenAIConfig struct {
	APIKey string // sent as a bearer token; "" sends none (local compatible servers)
	// BaseURL is the API root, such as https://api.openai.com/v1 (the default) or
	// http://localhost:11434/v1; chat/completions is appended.
	BaseURL    string
	HTTPClient *http.Client // nil: a client with the default transport and no timeout
	// MaxRetries is how often a 429, 5xx or connection failure is retried before the first
	// event: 0 means DefaultMaxRetries, a negative value none.
	MaxRetries int
	// RetryBaseDelay is the first backoff; 0 means DefaultRetryBaseDelay.
	RetryBaseDelay time.Duration
	// Name is the provider name in errors; "" means "openai".
	Name string
	// Model and Effort apply to requests that leave theirs empty.
	Model  string
	Effort string
	// LegacyMaxTokens sends Request.MaxTokens as max_tokens, which older compatible servers
	// know, instead of max_completion_tokens.
	LegacyMaxTokens bool
}

// OpenAI streams Chat Completions from OpenAI or an OpenAI-compatible server. Reasoning deltas
// of compatible servers (a "reasoning_content" or "reasoning" field in the delta) become
// EventThinkingDelta. It is safe for concurrent use.
//
// It speaks the wire format itself rather than through the official SDK: the request body is
// built with appends and the chunks are read by a decoder made for their shape (see
// decodeChunk). The SDK's reflective encoder and decoder cost most of the runtime's CPU per
// turn, for a request and chunks of a handful of fields.
type OpenAI struct {
	client  *http.Client
	url     string // the chat/completions endpoint
	urlErr  error  // a BaseURL that does not parse
	auth    string // the Authorization header, or ""
	cfg     OpenAIConfig
	retry   retrier
	readers sync.Pool // of *bufio.Reader
}

var _ Provider = (*OpenAI)(nil)

// DefaultOpenAIBaseURL is the API root used when OpenAIConfig.BaseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// NewOpenAI returns a provider for cfg. It reads no environment variable. A BaseURL that does
// not parse fails every call with an error wrapping ErrBadRequest.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	if cfg.Name == "" {
		cfg.Name = ProviderOpenAI
	}
	p := &OpenAI{
		client: cfg.HTTPClient,
		cfg:    cfg,
		retry:  newRetrier(cfg.Name, cfg.MaxRetries, cfg.RetryBaseDelay, cfg.APIKey),
	}
	if p.client == nil {
		p.client = &http.Client{}
	}
	p.url, p.urlErr = chatURL(cmp.Or(cfg.BaseURL, DefaultOpenAIBaseURL))
	if p.urlErr != nil {
		p.urlErr = fmt.Errorf("%w: %s: base URL %q: %w", ErrBadRequest, cfg.Name, cfg.BaseURL, p.urlErr)
	}
	if cfg.APIKey != "" {
		p.auth = "Bearer " + cfg.APIKey
	}
	return p
}

// chatURL is the chat/completions endpoint under base.
func chatURL(base string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", errors.New("want an http or https URL such as https://api.openai.com/v1")
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u.JoinPath("chat/completions").String(), nil
}

// Stream implements Provider. On error it also returns what was received so far.
func (p *OpenAI) Stream(ctx context.Context, req Request, emit func(Event) error) (Response, error) {
	if p.urlErr != nil {
		return Response{}, p.urlErr
	}
	model := cmp.Or(req.Model, p.cfg.Model)
	if model == "" {
		return Response{}, fmt.Errorf("%w: %s: request has no model", ErrBadRequest, p.cfg.Name)
	}
	effort := cmp.Or(req.Effort, p.cfg.Effort)
	if err := checkEffort(effort); err != nil {
		return Response{}, err
	}
	// Not pooled: the transport may read a request body after the response arrived.
	body := new(requestBody)
	var err error
	if body.b, err = p.appendRequest(make([]byte, 0, 1024), &req, model, effort); err != nil {
		return Response{}, err
	}
	em := emitter{emit: emit}
	var acc openaiAccumulator
	err = p.retry.run(ctx, &em, func() error {
		acc.reset()
		return p.attempt(ctx, body, &em, &acc)
	})
	return acc.response(), err
}

// attempt makes one HTTP call and reads its stream into acc. Once the answer has emitted an
// event it releases the request's body (no attempt follows).
func (p *OpenAI) attempt(ctx context.Context, body *requestBody, em *emitter, acc *openaiAccumulator) error {
	b := body.bytes()
	if b == nil {
		return p.retry.streamError("request body released before an attempt", false) // not reached: see release
	}
	// sent says when the transport has read all of it, as an httptrace.ClientTrace would, which
	// was a context and 200 bytes more of each open stream.
	sent := &sentBody{}
	sent.r.Reset(b)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, sent)
	if err != nil {
		return p.retry.transportError(err)
	}
	hreq.ContentLength = int64(len(b))
	hreq.GetBody = func() (io.ReadCloser, error) { // the default one would hold b
		if b := body.bytes(); b != nil {
			return io.NopCloser(bytes.NewReader(b)), nil
		}
		return nil, errReleased
	}
	h := hreq.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"text/event-stream"}
	if p.auth != "" {
		h["Authorization"] = []string{p.auth}
	}
	res, err := p.client.Do(hreq)
	if err != nil {
		return p.retry.transportError(err)
	}
	defer func() { _ = res.Body.Close() }() // a read-only body: nothing to report on close
	if res.StatusCode >= 400 {
		return p.retry.httpError(res.StatusCode, readErrorBody(res.Body), res.Header)
	}
	// Read no further: the answer's header and the request (its header, URL and trace) would be
	// more than a KiB of each open stream.
	res.Header, res.Request = nil, nil
	br, _ := p.readers.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReaderSize(res.Body, eventBufferSize)
	} else {
		br.Reset(res.Body)
	}
	defer func() {
		br.Reset(nil)
		p.readers.Put(br)
	}()
	events := eventReader{r: br}
	var chunk openaiChunk
	released := false
	for {
		data, err := events.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return p.retry.transportError(err)
		}
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			// Read the end of the body, so that the connection is reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(br, 64<<10))
			break
		}
		isError, err := decodeChunk(data, &chunk)
		if err != nil {
			return p.retry.transportError(err)
		}
		if isError {
			msg, retryable := errorEventMessage(data)
			return p.retry.streamError("error event in stream: "+msg, retryable)
		}
		if err := acc.add(&chunk, em); err != nil {
			return err
		}
		if em.emitted && !released && sent.read.Load() {
			sent.r.Reset(nil)
			body.release()
			released = true
		}
	}
	if !acc.started {
		return p.retry.streamError("the stream ended before any chunk", true)
	}
	return acc.finish(em)
}

// sentBody is an attempt's request body, in memory: read to its end, the transport is done
// with it. Go's HTTP/2 transport closes a body only when the call ends, so Close would not tell.
// Only Read: a WriteTo would go round the mark.
type sentBody struct {
	r    bytes.Reader
	read atomic.Bool // every byte was read: no further Read touches r, which the call may reset
}

func (s *sentBody) Read(p []byte) (int, error) {
	if s.read.Load() {
		return 0, io.EOF
	}
	n, err := s.r.Read(p)
	if s.r.Len() == 0 {
		s.read.Store(true)
	}
	return n, err
}

func (s *sentBody) Close() error { return nil }

// openaiCall is a tool call being assembled from deltas.
type openaiCall struct {
	index int
	id    string
	name  string
	args  strings.Builder
}

// openaiAccumulator assembles the chunks of one attempt.
type openaiAccumulator struct {
	started  bool // a chunk was decoded
	text     strings.Builder
	thinking strings.Builder
	calls    []*openaiCall
	done     []ToolCall // calls emitted, in index order
	reason   string     // raw finish_reason, "" until seen
	usage    Usage
}

// reset forgets a failed attempt.
func (a *openaiAccumulator) reset() { *a = openaiAccumulator{} }

// add reads one chunk, emitting its text and reasoning.
func (a *openaiAccumulator) add(chunk *openaiChunk, em *emitter) error {
	a.started = true
	for ci := range chunk.Choices {
		ch := &chunk.Choices[ci]
		if ch.Index != 0 {
			continue // n is never set, but be safe
		}
		d := &ch.Delta
		thinking := d.thinking()
		if thinking != "" {
			a.thinking.WriteString(thinking)
			if err := em.send(Event{Type: EventThinkingDelta, Text: thinking}); err != nil {
				return err
			}
		}
		for _, text := range [2]string{d.Content, d.Refusal} {
			if text == "" {
				continue
			}
			a.text.WriteString(text)
			if err := em.send(Event{Type: EventTextDelta, Text: text}); err != nil {
				return err
			}
		}
		for ti := range d.ToolCalls {
			a.addCall(&d.ToolCalls[ti])
		}
		if ch.FinishReason != "" && a.reason == "" {
			a.reason = ch.FinishReason
			if err := a.flushCalls(em); err != nil {
				return err
			}
		}
	}
	if u := chunk.Usage; u != nil {
		a.usage = Usage{
			InputTokens:  u.PromptTokens,
			OutputTokens: u.CompletionTokens,
			CachedTokens: u.PromptTokensDetails.CachedTokens,
		}
	}
	return nil
}

// addCall merges a tool call delta. Deltas are matched by index; a new id at a known index
// (servers that leave index at 0 for parallel calls) starts a new call.
func (a *openaiAccumulator) addCall(tc *openaiToolCallDelta) {
	var call *openaiCall
	for i := len(a.calls) - 1; i >= 0; i-- {
		if a.calls[i].index == tc.Index {
			call = a.calls[i]
			break
		}
	}
	if call == nil || (tc.ID != "" && call.id != "" && tc.ID != call.id) {
		call = &openaiCall{index: tc.Index}
		a.calls = append(a.calls, call)
	}
	if tc.ID != "" {
		call.id = tc.ID
	}
	if name := tc.Function.Name; name != "" && name != call.name {
		call.name += name
	}
	call.args.WriteString(tc.Function.Arguments)
}

// flushCalls emits the assembled tool calls once the choice is finished.
func (a *openaiAccumulator) flushCalls(em *emitter) error {
	if len(a.calls) == 0 {
		return nil
	}
	a.done = make([]ToolCall, len(a.calls))
	for i, c := range a.calls {
		a.done[i] = ToolCall{ID: c.id, Name: c.name, Arguments: toolArguments(c.args.String())}
		if a.done[i].ID == "" {
			a.done[i].ID = fmt.Sprintf("call_%d", i+1)
		}
	}
	a.calls = nil
	for i := range a.done {
		if err := em.send(Event{Type: EventToolCall, ToolCall: &a.done[i]}); err != nil {
			return err
		}
	}
	return nil
}

// finish completes a stream that ended without error; a stream that ends before its
// finish_reason or without [DONE] still counts (compatible servers end streams differently).
func (a *openaiAccumulator) finish(em *emitter) error {
	if a.reason == "" {
		a.reason = "stop"
		return a.flushCalls(em)
	}
	return nil
}

// response is the answer assembled so far.
func (a *openaiAccumulator) response() Response {
	stop := a.reason
	switch stop {
	case "function_call":
		stop = "tool_calls"
	case "", "stop", "tool_calls", "length", "content_filter":
	default:
		stop = "stop"
	}
	if len(a.done) > 0 {
		stop = "tool_calls" // some compatible servers say "stop" after tool calls
	}
	return Response{
		Message: Message{
			Role:      RoleAssistant,
			Content:   a.text.String(),
			ToolCalls: a.done,
			Thinking:  a.thinking.String(),
		},
		Usage:      a.usage,
		StopReason: stop,
	}
}

// requestBody is the JSON of a model call, shared by its attempts. Once the answer has emitted
// an event no attempt follows (retrier.run), and once the transport has written the request it
// reads the body no more, so the call then lets go of it: an open stream does not hold its
// request, which for a real conversation (its history, the tools' schemas) is tens of KiB, for
// as long as the model streams.
type requestBody struct {
	mu sync.Mutex
	b  []byte // nil once released
}

var errReleased = errors.New("models: request body already released")

// bytes returns the body, nil once released.
func (rb *requestBody) bytes() []byte {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.b
}

func (rb *requestBody) release() {
	rb.mu.Lock()
	rb.b = nil
	rb.mu.Unlock()
}
