package runtime

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"svc/runner/access"
	"svc/runner/approvals"
	"svc/runner/sse"
)

// MCP serves the agent over the Model Context Protocol (Streamable HTTP) at /mcp: one tool per
// named agent, ask_<agent>, and ask for the default chat, each {message, session_id?} → the
// answer, with the session to continue in the structured result; text deltas go out as progress
// notifications. A tool call that needs approval asks the MCP client through elicitation when it
// supports it; otherwise the tool result lists what is pending, the turn waits, and the answer
// tool decides and returns the rest of the answer. Credentials are those of the chat routes
// (never the sign-in cookie); without one the answer is 401 with the RFC 9728 challenge.

// MCPSessionIdle is how long an MCP session may go without a request before it is closed.
const MCPSessionIdle = 30 * time.Minute

// mcpMaxBody bounds an MCP request's body: a message is at most MaxMessageLen characters, so
// 1 MiB leaves room for its JSON-RPC frame.
const mcpMaxBody = 1 << 20

// identityKey is the TokenInfo.Extra entry holding the caller's access.Identity.
const identityKey = "svc.identity"

// mcpRoutes serve /mcp and the protected-resource metadata of one runtime.
type mcpRoutes struct {
	rt      *Runtime
	handler http.Handler // the SDK's Streamable HTTP handler behind its bearer middleware

	// base ends the turns that outlive their tool call when the runtime closes.
	base context.Context
	stop context.CancelFunc

	mu    sync.Mutex
	turns map[string]*mcpTurn // by session id: the turns this process runs for MCP callers
}

// newMCPRoutes builds the runtime's MCP server: its tools follow the deployment's agents.
func newMCPRoutes(rt *Runtime) *mcpRoutes {
	m := &mcpRoutes{rt: rt, turns: map[string]*mcpTurn{}}
	m.base, m.stop = context.WithCancel(context.Background())
	cfg := rt.opts.Agent.Config
	srv := mcp.NewServer(&mcp.Implementation{Name: cmp.Or(cfg.Name, "agent"), Version: cmp.Or(rt.opts.DeployID, cfg.Version)},
		&mcp.ServerOptions{Instructions: cfg.Description})
	srv.AddTool(&mcp.Tool{Name: "ask", Description: askDescription(cfg.Name, cfg.Description, ""), InputSchema: askSchema, OutputSchema: outputSchema}, tool(m.ask("")))
	names := make([]string, 0, len(rt.opts.Agent.Agents))
	for name := range rt.opts.Agent.Agents {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		srv.AddTool(&mcp.Tool{Name: "ask_" + mcpToolName(name), Description: askDescription(cfg.Name, "", name), InputSchema: askSchema, OutputSchema: outputSchema}, tool(m.ask(name)))
	}
	srv.AddTool(&mcp.Tool{Name: "answer", Description: "Approve or deny a tool call that an ask tool reported as pending, then return the rest of the answer.",
		InputSchema: answerSchema, OutputSchema: outputSchema}, tool(m.answer))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout: MCPSessionIdle,
		// Agents are reached by host name (<slug>.<apps domain>, *.localhost included); the
		// bearer credential, which a browser never sends by itself, is what protects the route.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        mcpMaxBody,
		Logger:                     rt.log,
	})
	// The SDK reads the caller from the TokenInfo that only this middleware can put in the
	// request's context: built once, it hands over the identity ServeHTTP verified.
	m.handler = auth.RequireBearerToken(verifiedToken, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return m
}

// mcpIdentityKey is the request context's entry holding the identity ServeHTTP verified.
type mcpIdentityKey struct{}

// verifiedToken is the SDK's TokenInfo of the identity ServeHTTP verified (the credential was
// checked there; the SDK binds the session to UserID).
func verifiedToken(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
	who, ok := ctx.Value(mcpIdentityKey{}).(access.Identity)
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: mcpOwner(who), Expiration: who.ExpiresAt, Extra: map[string]any{identityKey: who}}, nil
}

// mcpToolName is a named agent's folder name as a tool name: MCP tool names take letters,
// digits, "_", "-" and ".".
func mcpToolName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			return r
		}
		return '_'
	}, name)
}

func askDescription(agentName, description, named string) string {
	who := "the agent " + agentName
	if named != "" {
		who = "the " + named + " agent of " + agentName
	}
	d := "Send a message to " + who + " and get its answer. Pass the session_id of an earlier answer to continue that conversation."
	if description != "" {
		d += " " + description
	}
	return d
}

// ServeHTTP authenticates the request with the chat routes' credentials, then hands it to the SDK.
func (m *mcpRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		r.Header.Del("Cookie") // MCP clients authenticate with a bearer credential only
	}
	who, err := m.rt.authenticate(r)
	if err != nil {
		m.challenge(w, r, err)
		return
	}
	// The SDK keeps contexts beyond the request (a session's tool calls run on it): the request's
	// log record must not travel with them.
	r = r.WithContext(context.WithValue(context.WithValue(r.Context(), requestLogKey{}, nil), mcpIdentityKey{}, who))
	if r.Header.Get("Authorization") == "" { // no credential needed (svc dev without AUTH_TOKEN)
		r.Header.Set("Authorization", "Bearer none")
	}
	m.handler.ServeHTTP(w, r)
}

// mcpOwner binds an MCP session to the credential that opened it: another credential sending
// its session id is refused by the SDK.
func mcpOwner(who access.Identity) string {
	return string(who.Method) + ":" + who.CredentialID + ":" + who.UserID
}

// challenge answers a request without a valid credential: 401 with the protected-resource
// metadata's address (RFC 9728 §5.1), in the runtime's error body.
func (m *mcpRoutes) challenge(w http.ResponseWriter, r *http.Request, err error) {
	var ae *APIError
	if errors.As(err, &ae) && (ae.Code == CodeUnauthenticated || ae.Code == CodeForbidden) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer resource_metadata=%q", m.rt.signin.origin(r)+"/.well-known/oauth-protected-resource"))
		if ae.Code == CodeForbidden { // a runtime token of another agent: to MCP clients, not a credential of this resource
			err = &APIError{Code: CodeUnauthenticated, Message: ae.Message}
		}
	}
	writeError(w, r, m.rt.log, err)
}

// metadata serves the OAuth 2.0 protected-resource metadata of /mcp (RFC 9728): the resource,
// the agent's identity provider as its authorization server when it has sign-in, and the bearer
// header as the only way to send a credential.
func (m *mcpRoutes) metadata(w http.ResponseWriter, r *http.Request) {
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               m.rt.signin.origin(r) + "/mcp",
		ResourceName:           cmp.Or(m.rt.opts.Agent.Config.Name, "agent"),
		BearerMethodsSupported: []string{"header"},
	}
	if set, err := m.rt.signin.settings(r.Context()); err == nil {
		md.AuthorizationServers = []string{set.OIDC.Issuer}
	}
	auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
}

// The tools' schemas. The tools decode their arguments themselves (tool): the SDK's typed tools
// validate every call's input and output against schemas inferred by reflection, a third of the
// cost MCP adds to a turn.
var (
	askSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["message"],"properties":{
		"message":{"type":"string","description":"the message to the agent"},
		"session_id":{"type":"string","description":"the session_id of an earlier answer, to continue that conversation"}}}`)
	answerSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["session_id","correlation_id","approved"],"properties":{
		"session_id":{"type":"string","description":"the session_id of the answer that listed the pending item"},
		"correlation_id":{"type":"string","description":"the correlation_id of the pending item"},
		"approved":{"type":"boolean","description":"true to let the tool call run, false to deny it"}}}`)
	outputSchema = json.RawMessage(`{"type":"object","required":["session_id"],"properties":{
		"session_id":{"type":"string","description":"pass it to the next ask to continue the conversation"},
		"done_reason":{"type":"string","description":"why the turn ended; absent while it waits for an answer to a pending item"},
		"pending":{"type":"array","description":"what the turn waits for","items":{"type":"object","properties":{
			"kind":{"type":"string","description":"approval (answer with the answer tool) or durable_approval (answer as how says)"},
			"correlation_id":{"type":"string"},"tool":{"type":"string"},"parameters":{},"reason":{"type":"string"},"how":{"type":"string"}}}}}}`)
)

// tool adapts a tool function to the SDK: the arguments decoded strictly (an unknown or mistyped
// member is an error result naming it), an error as an error result the model can read, the
// output as structured content.
func tool[In any](fn func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, askOutput, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		if len(req.Params.Arguments) > 0 {
			dec := json.NewDecoder(bytes.NewReader(req.Params.Arguments))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return errorResult("arguments: " + err.Error()), nil
			}
		}
		res, out, err := fn(ctx, req, in)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		res.StructuredContent = out
		return res, nil
	}
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// askInput is the input of the ask tools.
type askInput struct {
	Message   string `json:"message"`
	SessionID string `json:"session_id,omitempty"`
}

// askOutput is the structured result of the ask and answer tools.
type askOutput struct {
	SessionID  string       `json:"session_id"`
	DoneReason string       `json:"done_reason,omitempty"`
	Pending    []mcpPending `json:"pending,omitempty"`
}

// mcpPending is what a turn waits for.
type mcpPending struct {
	Kind          string `json:"kind"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Tool          string `json:"tool"`
	Parameters    any    `json:"parameters,omitempty"`
	Reason        string `json:"reason,omitempty"`
	How           string `json:"how"`
}

// identity is the caller of an MCP request, as ServeHTTP authenticated it.
func identity(extra *mcp.RequestExtra) (access.Identity, error) {
	if extra != nil && extra.TokenInfo != nil {
		if who, ok := extra.TokenInfo.Extra[identityKey].(access.Identity); ok {
			return who, nil
		}
	}
	return access.Identity{}, errors.New("the request carries no credential")
}

// ask returns the handler of ask (named "") or ask_<named>.
func (m *mcpRoutes) ask(named string) func(context.Context, *mcp.CallToolRequest, askInput) (*mcp.CallToolResult, askOutput, error) {
	return func(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, askOutput, error) {
		who, err := identity(req.Extra)
		if err != nil {
			return nil, askOutput{}, err
		}
		if in.Message == "" {
			return nil, askOutput{}, errors.New("message: is required")
		}
		msg := in.Message
		t, err := m.rt.beginTurn(ctx, who, &chatRequest{Message: &msg, SessionID: in.SessionID, Agent: named})
		if err != nil {
			return nil, askOutput{}, mcpError(err)
		}
		mt := &mcpTurn{sessionID: t.SessionID(), changed: make(chan struct{}, 1), elicit: elicits(req.Session)}
		mt.follow(ctx, req)
		m.mu.Lock()
		m.turns[mt.sessionID] = mt
		m.mu.Unlock()
		m.rt.wg.Add(1)
		go func() {
			defer m.rt.wg.Done()
			// The turn outlives the tool call when it waits for an answer the MCP client gives
			// with the answer tool; a turn nobody answers ends when its approvals expire.
			runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			defer cancel()
			defer context.AfterFunc(m.base, cancel)()
			t.Run(runCtx, &mcpSink{m: m, t: mt, hub: m.rt.hub, agentID: m.rt.opts.AgentID})
			m.mu.Lock()
			if m.turns[mt.sessionID] == mt {
				delete(m.turns, mt.sessionID)
			}
			m.mu.Unlock()
		}()
		return mt.wait(ctx)
	}
}

// answerInput is the input of the answer tool.
type answerInput struct {
	SessionID     string `json:"session_id"`
	CorrelationID string `json:"correlation_id"`
	Approved      *bool  `json:"approved"`
}

// answer decides a pending approval, then follows the turn to its end or its next pending item.
func (m *mcpRoutes) answer(ctx context.Context, req *mcp.CallToolRequest, in answerInput) (*mcp.CallToolResult, askOutput, error) {
	who, err := identity(req.Extra)
	if err != nil {
		return nil, askOutput{}, err
	}
	if checkSessionID("session_id", in.SessionID) != nil || in.CorrelationID == "" || in.Approved == nil {
		return nil, askOutput{}, errors.New("session_id, correlation_id and approved: all are required (the first two as the pending item gave them)")
	}
	if _, err := m.rt.turns.Get(ctx, who, in.SessionID); err != nil {
		return nil, askOutput{}, mcpError(err)
	}
	// The turn first: once decided, it may end before this call looks for it.
	m.mu.Lock()
	mt := m.turns[in.SessionID]
	m.mu.Unlock()
	if mt != nil {
		mt.follow(ctx, req) // this call receives the rest of the answer's progress
	}
	status := approvals.Denied
	if *in.Approved {
		status = approvals.Approved
	}
	a, err := m.rt.hub.Decide(ctx, m.rt.opts.AgentID, in.SessionID, in.CorrelationID, status)
	switch {
	case errors.Is(err, approvals.ErrNotFound):
		return nil, askOutput{}, fmt.Errorf("session %s has no pending approval %q", in.SessionID, in.CorrelationID)
	case errors.Is(err, approvals.ErrDecided):
		return nil, askOutput{}, fmt.Errorf("approval %s is %s already", in.CorrelationID, a.Status)
	case err != nil:
		return nil, askOutput{}, err
	}
	if mt == nil { // the turn runs in another process
		text := fmt.Sprintf("Approval %s is %s. The turn goes on where it runs; call an ask tool with session_id %s to continue the conversation.", in.CorrelationID, status, in.SessionID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, askOutput{SessionID: in.SessionID}, nil
	}
	mt.resolve(in.CorrelationID)
	return mt.wait(ctx)
}

// mcpError is err as an MCP client reads it: the runtime's message, without HTTP status.
func mcpError(err error) error {
	var ae *APIError
	if errors.As(err, &ae) {
		return errors.New(ae.Message)
	}
	return err
}

// elicits reports whether the MCP client can answer an elicitation (a form).
func elicits(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// mcpTurn is a turn an MCP tool call follows: the text not yet returned, the items pending,
// the end.
type mcpTurn struct {
	sessionID string
	elicit    bool
	changed   chan struct{} // a non-blocking signal to the waiting tool call

	mu       sync.Mutex
	text     strings.Builder
	pending  []mcpPending
	done     string // the done reason, once the turn ended
	errs     []string
	progress *mcpProgress       // where text deltas go as progress notifications; nil: nowhere
	ss       *mcp.ServerSession // the MCP session of the call that follows the turn
	ctx      context.Context    // that call's context
}

// mcpProgress sends a tool call's progress notifications.
type mcpProgress struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any
	n     float64
}

// follow makes req the call that receives the turn's progress (when it asked for it).
func (t *mcpTurn) follow(ctx context.Context, req *mcp.CallToolRequest) {
	var p *mcpProgress
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		p = &mcpProgress{ctx: ctx, ss: req.Session, token: token}
	}
	t.mu.Lock()
	t.progress, t.ss, t.ctx = p, req.Session, ctx
	t.mu.Unlock()
}

func (t *mcpTurn) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// resolve drops a decided item from the pending list.
func (t *mcpTurn) resolve(correlationID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = slices.DeleteFunc(t.pending, func(p mcpPending) bool { return p.CorrelationID == correlationID })
}

// wait returns the tool result once the turn ended or waits for an answer only the MCP client
// can give; the text returned is what the turn said since the last result.
func (t *mcpTurn) wait(ctx context.Context) (*mcp.CallToolResult, askOutput, error) {
	for {
		t.mu.Lock()
		if t.done != "" || len(t.pending) > 0 {
			res, out := t.resultLocked()
			t.progress = nil
			t.mu.Unlock()
			return res, out, nil
		}
		t.mu.Unlock()
		select {
		case <-t.changed:
		case <-ctx.Done():
			t.mu.Lock()
			t.progress = nil
			t.mu.Unlock()
			return nil, askOutput{}, context.Cause(ctx)
		}
	}
}

func (t *mcpTurn) resultLocked() (*mcp.CallToolResult, askOutput) {
	text := t.text.String()
	t.text.Reset()
	out := askOutput{SessionID: t.sessionID, DoneReason: t.done, Pending: append([]mcpPending(nil), t.pending...)}
	var b strings.Builder
	b.WriteString(text)
	for _, p := range out.Pending {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		params, _ := json.Marshal(p.Parameters)
		fmt.Fprintf(&b, "Pending: the tool %s wants to run with %s (%s). %s", p.Tool, params, p.Reason, p.How)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}
	if len(t.errs) > 0 && text == "" && len(out.Pending) == 0 {
		res.IsError = true
		res.Content = []mcp.Content{&mcp.TextContent{Text: strings.Join(t.errs, "\n")}}
	}
	return res, out
}

// mcpSink collects a turn's frames for the MCP tool call that follows it.
type mcpSink struct {
	m       *mcpRoutes
	t       *mcpTurn
	hub     *approvals.Hub
	agentID string
}

// Emit implements loop.Sink.
func (s *mcpSink) Emit(f *sse.Frame) error {
	t := s.t
	switch f.Type {
	case sse.TypeTextDelta:
		t.mu.Lock()
		t.text.WriteString(f.Content)
		p := t.progress
		if p != nil {
			p.n++
			// A client that went away only loses its progress; the answer is in the result.
			_ = p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: f.Content})
		}
		t.mu.Unlock()
	case sse.TypeError:
		t.mu.Lock()
		t.errs = append(t.errs, f.Message)
		t.mu.Unlock()
	case sse.TypeConfirmationRequired:
		p := mcpPending{Kind: "approval", CorrelationID: f.CorrelationID, Tool: f.ToolName, Parameters: rawOrNil(f.Parameters), Reason: f.ApprovalReason,
			How: fmt.Sprintf("Call the answer tool with session_id %q, correlation_id %q and approved true or false.", t.sessionID, f.CorrelationID)}
		t.mu.Lock()
		ss, ctx := t.ss, t.ctx
		t.mu.Unlock()
		if t.elicit && ss != nil {
			s.m.rt.wg.Add(1)
			go s.elicit(ctx, ss, p)
			return nil
		}
		t.mu.Lock()
		t.pending = append(t.pending, p)
		t.mu.Unlock()
		t.signal()
	case sse.TypeDurableApproval:
		t.mu.Lock()
		t.pending = append(t.pending, mcpPending{Kind: "durable_approval", Tool: f.ToolName, Reason: f.Question,
			How: fmt.Sprintf("A durable tool paused for a person's decision; answer it with POST /api/sessions/%s/answer on this agent's URL (or in the console), then call an ask tool with session_id %q.", t.sessionID, t.sessionID)})
		t.mu.Unlock()
	case sse.TypeDone:
		t.mu.Lock()
		t.done = f.Reason
		t.mu.Unlock()
		t.signal()
	}
	return nil
}

// elicit asks the MCP client to approve a tool call and decides it; when the client cannot
// answer, the call is listed as pending in the result instead.
func (s *mcpSink) elicit(ctx context.Context, ss *mcp.ServerSession, p mcpPending) {
	defer s.m.rt.wg.Done()
	// On the call's context, so that the request goes out on the call's own stream.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	defer context.AfterFunc(s.m.base, cancel)()
	params, _ := json.Marshal(p.Parameters)
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{
		Message: fmt.Sprintf("Allow the tool %s to run with %s? %s", p.Tool, params, p.Reason),
		RequestedSchema: map[string]any{"type": "object", "required": []string{"approve"},
			"properties": map[string]any{"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "true lets the call run"}}},
	})
	if err != nil {
		s.t.mu.Lock()
		s.t.pending = append(s.t.pending, p)
		s.t.mu.Unlock()
		s.t.signal()
		return
	}
	status := approvals.Denied
	if res.Action == "accept" {
		if ok, _ := res.Content["approve"].(bool); ok {
			status = approvals.Approved
		}
	}
	if _, err := s.hub.Decide(ctx, s.agentID, s.t.sessionID, p.CorrelationID, status); err != nil && !errors.Is(err, approvals.ErrDecided) {
		s.m.rt.log.Warn("mcp: decide an elicited approval", "session_id", s.t.sessionID, "correlation_id", p.CorrelationID, "err", err)
	}
}
