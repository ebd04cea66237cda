package connections

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/tools"
)

// ToolName is the name of the connection tool.
const ToolName = "request"

// Intents of a request call (CONTRACT §7).
const (
	IntentRead  = "read"
	IntentWrite = "write"
	// IntentConfirmedWrite is the model's statement that the user already confirmed this exact
	// write in the conversation. It satisfies the intent a mutating method needs, like
	// IntentWrite, and is recorded (Decision.Escalated, the logs). It never replaces an
	// approval: a call whose rule asks for confirmation is asked about all the same, because
	// the model's word is not the user's answer (the chat it read may hold anything, including
	// a page that says "the user agreed").
	IntentConfirmedWrite = "confirmed_write"
)

var methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}

// Tool is the request tool over some of a Client's connections. It implements tools.Tool,
// tools.Labeler and tools.Approver, and is safe for concurrent use.
type Tool struct {
	c     *Client
	names []string
	conns map[string]*conn
	spec  models.ToolSpec
}

var (
	_ tools.Tool     = (*Tool)(nil)
	_ tools.Labeler  = (*Tool)(nil)
	_ tools.Approver = (*Tool)(nil)
)

// Tool returns the request tool over the connections names (a named agent's "connections";
// Names() for the unscoped chat). An unknown name, or none, is an error.
func (c *Client) Tool(names []string) (*Tool, error) {
	if len(names) == 0 {
		return nil, errors.New("connections: a request tool needs at least one connection")
	}
	t := &Tool{c: c, conns: make(map[string]*conn, len(names))}
	for _, n := range names {
		cn := c.conns[n]
		if cn == nil {
			return nil, fmt.Errorf("connections: no connection %q (known: %s)", n, strings.Join(c.names, ", "))
		}
		if cn.mcp != nil {
			return nil, fmt.Errorf("connections: connection %q is an MCP server: its tools come from MCPTools, not the request tool", n)
		}
		t.conns[n] = cn
	}
	t.names = slices.Sorted(slices.Values(names))
	t.names = slices.Compact(t.names)
	enum, _ := json.Marshal(t.names)  // strings always marshal
	mEnum, _ := json.Marshal(methods) // strings always marshal
	t.spec = models.ToolSpec{
		Name: ToolName,
		Description: "Call an HTTP API through one of the agent's connections. The connections, their endpoints and which calls " +
			"ask the user first are listed in the instructions. Reads use GET; a write (POST, PUT, PATCH, DELETE) needs intent " +
			`"write", or "confirmed_write" when the user has already confirmed this exact change in the conversation. ` +
			"The result is {status, headers, body}.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"connection":{"type":"string","description":"The connection to call.","enum":` + string(enum) + `},` +
			`"method":{"type":"string","description":"The HTTP method.","enum":` + string(mEnum) + `},` +
			`"path":{"type":"string","description":"The path relative to the connection's base URL, starting with /, such as /items/42. No scheme or host."},` +
			`"query":{"type":"object","description":"Query parameters: a value, or a list of values for a repeated parameter.",` +
			`"additionalProperties":{"type":["string","number","boolean","array","null"],"items":{"type":["string","number","boolean","null"]}}},` +
			`"body":{"description":"The JSON body of a POST, PUT, PATCH or DELETE."},` +
			`"intent":{"type":"string","enum":["read","write","confirmed_write"],"description":"read (the default) for GET and HEAD; write for a change; confirmed_write for a change the user has already confirmed."}},` +
			`"required":["connection","method","path"],"additionalProperties":false}`),
	}
	return t, nil
}

// NewTool is New followed by Tool over every connection: for a caller with one tool per Client.
func NewTool(conns []*agent.Connection, opts Options) (*Tool, error) {
	c, err := New(conns, opts)
	if err != nil {
		return nil, err
	}
	return c.Tool(c.RESTNames())
}

// Client returns the Client the tool belongs to.
func (t *Tool) Client() *Client { return t.c }

// Spec implements tools.Tool.
func (t *Tool) Spec() models.ToolSpec { return t.spec }

// Labels implements tools.Labeler: "Calling status: GET /incidents".
func (t *Tool) Labels(raw json.RawMessage) (running, completed string) {
	var a args
	if json.Unmarshal(raw, &a) != nil || a.Connection == "" {
		return "Calling a connection", "Called a connection"
	}
	what := a.Connection + ": " + strings.ToUpper(a.Method) + " " + a.Path
	return "Calling " + what, "Called " + what
}

// args are the arguments of a request call.
type args struct {
	Connection string          `json:"connection"`
	Method     string          `json:"method"`
	Path       string          `json:"path"`
	Query      map[string]any  `json:"query"`
	Body       json.RawMessage `json:"body"`
	Intent     string          `json:"intent"`
}

// Decision is what the rules say about a call the tool would send, for the loop's approval
// (the confirmation_required frame: endpoint, method, reason, connection_name).
type Decision struct {
	Connection string
	Method     string
	// Endpoint is the checked path, relative to the connection's base URL, as it is sent.
	Endpoint string
	// Rule is the endpoint key that governs the call (the policy.json rule when one matches,
	// else the access.json rule), or "" when neither file has one.
	Rule string
	// NeedsApproval says a rule asks the user first; ApprovalRule names it.
	NeedsApproval bool
	ApprovalRule  string
	// Reason is the policy rule's reason, else a sentence naming ApprovalRule.
	Reason string
	Intent string
	// Escalated marks a call the model sent as confirmed_write that is asked about anyway:
	// the model's word was escalated to the user's.
	Escalated bool
}

// prepared is a checked call, ready to send.
type prepared struct {
	conn    *conn
	method  string
	path    reqPath
	query   url.Values
	body    []byte
	intent  string
	verdict verdict
}

// Decide checks a call as Call would (arguments, path, intent, endpoint rules) without sending
// it or touching the rate limit. An error refuses the call and names the field or rule.
func (t *Tool) Decide(ctx context.Context, call tools.Call) (Decision, error) {
	p, err := t.prepare(call)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{
		Connection:    p.conn.def.Name,
		Method:        p.method,
		Endpoint:      p.path.escaped,
		Intent:        p.intent,
		NeedsApproval: p.verdict.confirm,
		ApprovalRule:  p.verdict.confirmBy,
		Reason:        p.verdict.reason,
	}
	// The governing rule: a specific one before a fallback, policy.json before access.json.
	switch v := p.verdict; {
	case v.policy != nil && !v.policy.fallback:
		d.Rule = v.policy.key
	case v.access != nil && !v.access.fallback:
		d.Rule = v.access.key
	case v.policy != nil || v.access != nil:
		d.Rule = FallbackKey
	}
	if d.NeedsApproval {
		d.Escalated = p.intent == IntentConfirmedWrite
		if d.Reason == "" {
			d.Reason = "The " + d.ApprovalRule + " asks the user before this call."
		}
	}
	return d, nil
}

// NeedsApproval implements tools.Approver: a request (for the confirmation_required frame) when the endpoint rule of the call asks for
// confirmation (policy.json confirm "always", or "write" on a mutating method, or an
// access.json "confirm" rule), whatever the intent; an error, without asking, for a call that
// would be refused anyway (bad arguments or path, missing intent or context key, a deny rule,
// a write only "*" matches).
func (t *Tool) NeedsApproval(ctx context.Context, call tools.Call) (*tools.ApprovalRequest, error) {
	d, err := t.Decide(ctx, call)
	if err != nil || !d.NeedsApproval {
		return nil, err
	}
	return &tools.ApprovalRequest{Endpoint: d.Endpoint, Method: d.Method, Reason: d.Reason, Escalated: d.Escalated, Connection: d.Connection}, nil
}

// Call implements tools.Tool. It checks everything again (arguments, path, intent, rules; it
// does not rely on NeedsApproval having run), then the rate limit, then sends the request. It
// does not ask for approval: that is the loop's, through NeedsApproval, before Call. A caller
// that runs tools without the loop (a composite tool's child calls) must call NeedsApproval
// itself and refuse, or ask, when it is true.
//
// The result is a Response as JSON, in Content and Data alike; every error (refusals, the rate
// limit, transport failures) names its field or rule and holds no secret. An HTTP error status
// is a result, not an error: the model reads the status.
func (t *Tool) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	began := time.Now()
	p, err := t.prepare(call)
	if err != nil {
		t.c.log.LogAttrs(ctx, slog.LevelInfo, "connection request refused", slog.String("session", call.Session.ID), slog.String("err", err.Error()))
		return tools.Result{}, err
	}
	attrs := []slog.Attr{
		slog.String("session", call.Session.ID), slog.String("connection", p.conn.def.Name),
		slog.String("method", p.method), slog.String("path", p.path.escaped), slog.String("intent", p.intent),
	}
	res, status, size, err := t.c.do(ctx, p, call.Session.Context)
	attrs = append(attrs, slog.Int64("duration_ms", time.Since(began).Milliseconds()))
	if err != nil {
		t.c.log.LogAttrs(ctx, slog.LevelInfo, "connection request failed", append(attrs, slog.String("err", err.Error()))...)
		return tools.Result{}, err
	}
	t.c.log.LogAttrs(ctx, slog.LevelInfo, "connection request", append(attrs, slog.Int("status", status), slog.Int64("bytes", size))...)
	return res, nil
}

// prepare parses and checks a call: everything but the rate limit and the network.
func (t *Tool) prepare(call tools.Call) (*prepared, error) {
	var a args
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf(`%w: want {"connection", "method", "path", "query"?, "body"?, "intent"?}: %v`, tools.ErrBadArguments, err)
	}
	p := &prepared{}
	if a.Connection == "" {
		return nil, fmt.Errorf("%w: connection: required, one of %s", tools.ErrBadArguments, strings.Join(t.names, ", "))
	}
	if p.conn = t.conns[a.Connection]; p.conn == nil {
		return nil, fmt.Errorf("%w: connection: %q is not one of %s", tools.ErrBadArguments, a.Connection, strings.Join(t.names, ", "))
	}
	p.method = strings.ToUpper(strings.TrimSpace(a.Method))
	if !slices.Contains(methods, p.method) {
		return nil, fmt.Errorf("%w: method: %q is not one of %s", tools.ErrBadArguments, a.Method, strings.Join(methods, ", "))
	}
	p.intent = a.Intent
	switch a.Intent {
	case "":
		p.intent = IntentRead
	case IntentRead, IntentWrite, IntentConfirmedWrite:
	default:
		return nil, fmt.Errorf("%w: intent: %q is not one of read, write, confirmed_write", tools.ErrBadArguments, a.Intent)
	}
	if mutating(p.method) && p.intent == IntentRead {
		return nil, fmt.Errorf(`%w: intent: %s changes data and needs intent "write" (or "confirmed_write" when the user has confirmed this change); got %q`, tools.ErrBadArguments, p.method, p.intent)
	}
	sessionCtx := call.Session.Context
	rp, err := parsePath(a.Path, sessionCtx)
	if err != nil {
		return nil, err
	}
	p.path = rp
	if p.query, err = t.query(p.conn, a.Query, rp.query, sessionCtx); err != nil {
		return nil, err
	}
	if len(a.Body) > 0 && !bytes.Equal(bytes.TrimSpace(a.Body), []byte("null")) {
		if !mutating(p.method) {
			return nil, fmt.Errorf("%w: body: only POST, PUT, PATCH and DELETE send a body; %s does not", tools.ErrBadArguments, p.method)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, a.Body); err != nil {
			return nil, fmt.Errorf("%w: body: %v", tools.ErrBadArguments, err)
		}
		if compact.Len() > maxRequestBody {
			return nil, fmt.Errorf("%w: body: %d bytes is over the limit of %d", tools.ErrBadArguments, compact.Len(), maxRequestBody)
		}
		p.body = compact.Bytes()
	}
	v, err := p.conn.rules.decide(p.method, rp.segs, rp.escaped, sessionCtx)
	if err != nil {
		return nil, fmt.Errorf("connection %s: %w", p.conn.def.Name, err)
	}
	p.verdict = v
	if ev := call.Session.Eval; ev != nil && mutating(p.method) {
		if !ev.MayWrite(p.conn.def.Name) {
			return nil, fmt.Errorf("connection %s: %s %s: an eval makes no writes unless it allows them: add the line \"Allow writes: %s\" under ## Setup of the eval", p.conn.def.Name, p.method, p.path.escaped, p.conn.def.Name)
		}
		p.verdict.confirm = false // the eval's permission stands for the user's approval
	}
	return p, nil
}

// query merges the call's query (templates filled) with the query written after "?" in the
// path. A name the connection's auth sets is refused: the model cannot replace a credential.
func (t *Tool) query(cn *conn, q map[string]any, fromPath url.Values, sessionCtx map[string]string) (url.Values, error) {
	out := url.Values{}
	for k, vs := range fromPath {
		out[k] = append(out[k], vs...)
	}
	for k, v := range q {
		var vals []any
		if list, ok := v.([]any); ok {
			vals = list
		} else {
			vals = []any{v}
		}
		for _, e := range vals {
			var s string
			switch x := e.(type) {
			case nil:
				continue
			case string:
				s = x
			case json.Number:
				s = x.String()
			case bool:
				s = strconv.FormatBool(x)
			default:
				return nil, fmt.Errorf("%w: query.%s: want a string, number or boolean (or a list of them)", tools.ErrBadArguments, k)
			}
			filled, err := fill("query."+k, s, sessionCtx, nil)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", tools.ErrBadArguments, err)
			}
			out.Add(k, filled)
		}
	}
	if a := cn.def.Spec.Auth; a != nil {
		for k := range out {
			if _, set := a.Query[k]; set {
				return nil, fmt.Errorf("%w: query.%s: set by connection %s itself (its auth); leave it out", tools.ErrBadArguments, k, cn.def.Name)
			}
		}
	}
	return out, nil
}

// do sends a prepared call within the rate limit and shapes the result.
func (c *Client) do(ctx context.Context, p *prepared, sessionCtx map[string]string) (tools.Result, int, int64, error) {
	cn := p.conn
	if cn.limit != nil {
		if ok, wait := cn.limit.take(c.opts.Now()); !ok {
			rl := cn.def.Access.RateLimit
			return tools.Result{}, 0, 0, &RateLimitError{Connection: cn.def.Name, RequestsPerMinute: rl.RequestsPerMinute, Burst: rl.Burst, RetryAfter: wait}
		}
	}
	resp, red, cancel, err := c.send(ctx, cn, p.method, p.path, p.query, p.body, sessionCtx)
	if err != nil {
		return tools.Result{}, 0, 0, err
	}
	defer cancel()
	defer resp.Body.Close()
	out, size, err := readResponse(resp, cn.hidden, red)
	if err != nil {
		return tools.Result{}, resp.StatusCode, size, red.err(fmt.Errorf("connection %s: %s %s: %w", cn.def.Name, p.method, p.path.escaped, err))
	}
	b := encodeJSON(out)
	return tools.Result{Content: string(b), Data: b}, resp.StatusCode, size, nil
}
