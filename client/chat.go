package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ErrStreamEnded is returned by ChatStream when the stream ends before its done frame (the
// runtime went away, or a proxy cut the response).
var ErrStreamEnded = errors.New("client: chat stream ended before its done frame")

// ErrNothingToResume is returned by ResumeStream when the session ran no turn in the last 5
// minutes (the runtime answered 204): there is nothing to reattach to.
var ErrNothingToResume = errors.New("client: no turn of the session to reattach to")

// Frame types of spec §6.1 that clients commonly act on.
const (
	FrameInit           = "init"
	FrameTextDelta      = "text_delta"
	FrameThinkingDelta  = "thinking_delta"
	FrameToolCallStart  = "tool_call_start"
	FrameToolCallResult = "tool_call_result"
	FrameWarning        = "warning"
	FrameError          = "error"
	FrameDone           = "done"

	FrameConfirmationRequired = "confirmation_required"
	FrameApproved             = "approved"
	FrameDenied               = "denied"
	FrameAskChoice            = "ask_choice"
	FrameAgentHandoff         = "agent_handoff"
	FrameWidget               = "widget"
	FrameInputRedacted        = "input_redacted"
)

// Option is one choice of an ask_choice frame.
type Option struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

// ChatRequest is the chat request body of spec §2.5 (the fields a terminal client sends).
type ChatRequest struct {
	Message   string            `json:"message"`
	SessionID string            `json:"session_id,omitempty"`
	ScopeID   string            `json:"scope_id,omitempty"`
	Context   map[string]string `json:"context,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Agent     string            `json:"agent,omitempty"`
	Skill     string            `json:"skill,omitempty"`
	// OnDisconnect is "abort" (default) or "continue": the turn runs on after the connection
	// drops, and ResumeStream reattaches to it.
	OnDisconnect string `json:"on_disconnect,omitempty"`
}

// Usage is the token usage of a done frame.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// Frame is one chat stream frame (spec §6.1). Fields a frame type does not carry stay empty; Raw
// holds the whole JSON object for the fields not modelled here, and ID the stream's last "id:".
type Frame struct {
	Type       string          `json:"type"`
	Timestamp  string          `json:"timestamp,omitempty"`
	SessionID  string          `json:"session_id,omitempty"`
	Content    string          `json:"content,omitempty"`
	Message    string          `json:"message,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	ToolID     string          `json:"tool_id,omitempty"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Status     string          `json:"status,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Turns      int             `json:"turns,omitempty"`
	Usage      *Usage          `json:"usage,omitempty"`

	// confirmation_required, approved, denied
	CorrelationID  string `json:"correlation_id,omitempty"`
	Endpoint       string `json:"endpoint,omitempty"`
	Method         string `json:"method,omitempty"`
	ConnectionName string `json:"connection_name,omitempty"`
	PreviewID      string `json:"preview_id,omitempty"`
	TimedOut       bool   `json:"timeout,omitempty"`
	// ask_choice
	AskID    string   `json:"ask_id,omitempty"`
	Question string   `json:"question,omitempty"`
	Options  []Option `json:"options,omitempty"`
	Multi    bool     `json:"multi,omitempty"`
	// agent_handoff
	From         string   `json:"from,omitempty"`
	To           string   `json:"to,omitempty"`
	RemovedTools []string `json:"removed_tools,omitempty"`
	// widget
	WidgetType string          `json:"widget_type,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	// input_redacted
	Text string `json:"text,omitempty"`

	ID  string          `json:"-"`
	Raw json.RawMessage `json:"-"`
}

// ChatStream posts req to agentURL's /chat/stream with the runtime token and calls onFrame for
// each frame, in order, until the done frame (then it returns nil without reading further). It
// returns onFrame's error as is, ErrStreamEnded when the stream ends before done, ctx's error when
// ctx ends, and a *Error when the runtime refuses the request (409 turn_in_progress among others).
//
// The connection always goes to the platform's address (SVC_URL's host and port): one listener
// serves the platform and every agent (CONTRACT §2), and agent names under *.localhost need not
// resolve. The agent's host travels in the Host header (and as the TLS server name).
func (c *Client) ChatStream(ctx context.Context, agentURL, runtimeToken string, req ChatRequest, onFrame func(Frame) error) error {
	target, err := url.Parse(strings.TrimRight(agentURL, "/") + "/chat/stream")
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return fmt.Errorf("chat: agent URL %q: want http(s)://host[:port]", agentURL)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("chat: encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("chat: build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("Authorization", "Bearer "+runtimeToken)
	resp, err := c.agents.Do(hreq)
	if err != nil {
		return fmt.Errorf("chat with %s: %w", target.Host, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("chat with %s: %w", target.Host, responseError(resp))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("chat with %s: the answer is %q, not an event stream", target.Host, resp.Header.Get("Content-Type"))
	}
	return readFrames(ctx, resp.Body, onFrame)
}

// ResumeStream reattaches to the running or last turn of session sessionID on the agent at
// agentURL (GET /chat/sessions/{id}/stream with Last-Event-ID lastID, "" for the whole turn)
// and calls onFrame for each frame after lastID until done. Errors as ChatStream, and
// ErrNothingToResume when no turn of the session ran in the last 5 minutes.
func (c *Client) ResumeStream(ctx context.Context, agentURL, runtimeToken, sessionID, lastID string, onFrame func(Frame) error) error {
	target, err := url.Parse(strings.TrimRight(agentURL, "/") + "/chat/sessions/" + url.PathEscape(sessionID) + "/stream")
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return fmt.Errorf("resume: agent URL %q: want http(s)://host[:port]", agentURL)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return fmt.Errorf("resume: build request: %w", err)
	}
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("Authorization", "Bearer "+runtimeToken)
	if lastID != "" {
		hreq.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.agents.Do(hreq)
	if err != nil {
		return fmt.Errorf("resume with %s: %w", target.Host, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	if resp.StatusCode == http.StatusNoContent {
		return ErrNothingToResume
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("resume with %s: %w", target.Host, responseError(resp))
	}
	return readFrames(ctx, resp.Body, onFrame)
}

// AnswerApproval answers the confirmation_required correlationID of session sessionID on the
// agent at agentURL (POST /chat/sessions/{id}/ask-user-response) and returns the approval's
// status: approved or denied. A decided approval is a *Error with status 409.
func (c *Client) AnswerApproval(ctx context.Context, agentURL, runtimeToken, sessionID, correlationID string, approved bool) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	path := "/chat/sessions/" + url.PathEscape(sessionID) + "/ask-user-response"
	body := map[string]any{"correlation_id": correlationID, "approved": approved}
	if err := c.agentCall(ctx, "answer approval", http.MethodPost, agentURL, path, runtimeToken, body, &out); err != nil {
		return "", err
	}
	return out.Status, nil
}

// readFrames parses the SSE body into frames until done.
func readFrames(ctx context.Context, body io.Reader, onFrame func(Frame) error) error {
	sr := newSSEReader(body, MaxEventSize)
	for n := 1; ; n++ {
		ev, err := sr.next()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				return cause
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return ErrStreamEnded
			}
			return fmt.Errorf("chat stream: %w", err)
		}
		var f Frame
		if err := json.Unmarshal(ev.data, &f); err != nil {
			return fmt.Errorf("chat stream: frame %d is not a JSON object: %w", n, err)
		}
		if f.Type == "" {
			return fmt.Errorf("chat stream: frame %d has no type", n)
		}
		f.ID, f.Raw = ev.id, json.RawMessage(ev.data)
		if err := onFrame(f); err != nil {
			return err
		}
		if f.Type == FrameDone {
			return nil
		}
	}
}

// agentClient returns an HTTP client for agent URLs that connects to platformAddr whatever host
// the URL names. A client whose transport is an *http.Transport (or the default) gets a clone whose
// dialer does that (so TLS still names the agent's host); any other transport gets a wrapper that
// rewrites the request's address and keeps the agent's host in the Host header.
func agentClient(base *http.Client, platformAddr string) *http.Client {
	out := *base
	var t *http.Transport
	switch rt := base.Transport.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		out.Transport = hostRewriter{next: rt, addr: platformAddr}
		return &out
	}
	var d net.Dialer
	t.Proxy = nil // the platform is dialled directly
	t.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, platformAddr)
	}
	out.Transport = t
	return &out
}

// hostRewriter sends every request to addr, keeping the URL's host as the Host header.
type hostRewriter struct {
	next http.RoundTripper
	addr string
}

// RoundTrip implements http.RoundTripper.
func (h hostRewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	r.URL.Host = h.addr
	return h.next.RoundTrip(r)
}
