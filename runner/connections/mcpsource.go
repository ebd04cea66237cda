package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/agent"
	"svc/agent/toolschema"
)

// MaxMCPTools bounds the tools one mcp connection offers: a server that lists more offers the
// first MaxMCPTools by name, and its health says so.
const MaxMCPTools = 128

// maxMCPListed bounds the tools read while listing (every page): past it the listing stops,
// so that a server that pages forever cannot hold the runtime.
const maxMCPListed = 20_000

// maxMCPSchema bounds the JSON text of one tool's input schema.
const maxMCPSchema = 64 << 10

// MaxMCPResponseBytes bounds one HTTP response of an MCP server (a JSON answer or one
// server-sent event). A bigger result fails the call with an error result, never read whole.
const MaxMCPResponseBytes = 4 << 20

// mcpToolName is what a tool's name must be after "<connection>__" is prefixed.
var mcpToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// MCPStatus is the state of an mcp connection, for /health.
type MCPStatus struct {
	// Listed says initialize and tools/list succeeded (the last time they ran).
	Listed bool `json:"listed"`
	// Tools is the number of tools offered.
	Tools int `json:"tools"`
	// Warnings name the tools left out (over MaxMCPTools, a bad name or schema).
	Warnings []string `json:"warnings,omitempty"`
	// Error is the last error (connect, list or call transport), without secrets.
	Error     string    `json:"error,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
}

// mcpSource is one mcp connection: its session (opened at first use, re-opened after the
// server forgets it) and its cached tool list (refreshed on notifications/tools/list_changed).
type mcpSource struct {
	c  *Client
	cn *conn

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   map[string]*mcp.Tool // by the server's name; nil until listed
	// stale says notifications/tools/list_changed arrived: list again before the next use. It
	// is atomic because the SDK delivers the notification while a list may hold mu.
	stale atomic.Bool
	// tooBig says a response went over MaxMCPResponseBytes since the last call looked.
	tooBig atomic.Bool
	status MCPStatus
}

// connect opens a session with the server, through the Client's checked transport. The caller
// holds s.mu.
func (s *mcpSource) connect(ctx context.Context) (*mcp.ClientSession, error) {
	name := s.cn.def.Name
	base := s.cn.base
	if base == nil {
		raw, err := s.c.resolve(ctx, "baseUrl", s.cn.def.Spec.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("connection %s: %w", name, err)
		}
		if base, err = checkBaseURL(raw, s.c.opts.AllowMetadata); err != nil {
			return nil, fmt.Errorf("connection %s: %s: %w", name, s.cn.def.Spec.BaseURL, err)
		}
	}
	port := base.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[base.Scheme]
	}
	hc := &http.Client{
		Transport:     &mcpTransport{c: s.c, cn: s.cn, hostport: net.JoinHostPort(base.Hostname(), port)},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "svc", Version: "1"}, &mcp.ClientOptions{
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.invalidate() },
	})
	tr := &mcp.StreamableClientTransport{Endpoint: base.String(), HTTPClient: hc, MaxRetries: 1, MaxEventSize: 2 * MaxMCPResponseBytes}
	cctx, cancel := context.WithTimeout(ctx, s.c.opts.Timeout)
	defer cancel()
	cs, err := client.Connect(cctx, tr, nil)
	if err != nil {
		return nil, s.redact(ctx, fmt.Errorf("connection %s: initialize: %w", name, err))
	}
	return cs, nil
}

// redact removes the connection's credentials from err.
func (s *mcpSource) redact(ctx context.Context, err error) error {
	_, red, rerr := s.c.mcpHeaders(ctx, s.cn)
	if rerr != nil {
		return err
	}
	return red.err(err)
}

// invalidate marks the tool list stale (notifications/tools/list_changed).
func (s *mcpSource) invalidate() {
	s.stale.Store(true)
	s.changed()
}

// changed tells Options.ToolsChanged that the connection's tools may have changed.
func (s *mcpSource) changed() {
	if f := s.c.opts.ToolsChanged; f != nil {
		f(s.cn.def.Name)
	}
}

// ensure returns the open session and the tool list, connecting and listing when needed.
func (s *mcpSource) ensure(ctx context.Context) (*mcp.ClientSession, map[string]*mcp.Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil && s.tools != nil && !s.stale.Load() {
		return s.session, s.tools, nil
	}
	err := s.refreshLocked(ctx)
	return s.session, s.tools, err
}

// refreshLocked (re)connects when there is no session and lists the tools. The caller holds s.mu.
func (s *mcpSource) refreshLocked(ctx context.Context) error {
	s.status.CheckedAt = s.c.opts.Now().UTC()
	if s.session == nil {
		cs, err := s.connect(ctx)
		if err != nil {
			s.status.Listed, s.status.Error = false, err.Error()
			return err
		}
		s.session = cs
	}
	s.stale.Store(false)
	tools, warnings, err := s.list(ctx)
	if err != nil {
		err = s.redact(ctx, fmt.Errorf("connection %s: tools/list: %w", s.cn.def.Name, err))
		s.status.Listed, s.status.Error = false, err.Error()
		s.dropLocked()
		return err
	}
	same := s.tools != nil && len(s.tools) == len(tools)
	for name, t := range tools {
		same = same && s.tools[name] != nil && reflect.DeepEqual(*s.tools[name], *t)
	}
	s.tools = tools
	if !same {
		s.changed()
	}
	s.status = MCPStatus{Listed: true, Tools: len(tools), Warnings: warnings, CheckedAt: s.status.CheckedAt}
	for _, w := range warnings {
		s.c.log.Warn("mcp connection tool left out", "connection", s.cn.def.Name, "warning", w)
	}
	return nil
}

// list reads every page of tools/list and keeps the valid ones, at most MaxMCPTools by name.
func (s *mcpSource) list(ctx context.Context) (map[string]*mcp.Tool, []string, error) {
	lctx, cancel := context.WithTimeout(ctx, s.c.opts.Timeout)
	defer cancel()
	var (
		kept     []*mcp.Tool // sorted by name, at most MaxMCPTools
		warnings []string
		listed   int
		seen     = map[string]bool{}
	)
	prefix := s.cn.def.Name + agent.MCPToolSeparator
	for t, err := range s.session.Tools(lctx, nil) {
		if err != nil {
			return nil, nil, err
		}
		if listed++; listed > maxMCPListed {
			warnings = append(warnings, fmt.Sprintf("the server lists more than %d tools; the rest were not read", maxMCPListed))
			break
		}
		switch {
		case t == nil:
			continue
		case !mcpToolName.MatchString(prefix + t.Name):
			if len(warnings) < 20 {
				warnings = append(warnings, fmt.Sprintf("tool %q: %s%s is not a valid tool name (letters, digits, '_' and '-', at most 64)", t.Name, prefix, t.Name))
			}
			continue
		case seen[t.Name]:
			continue
		}
		if msg := checkMCPSchema(t.InputSchema); msg != "" {
			if len(warnings) < 20 {
				warnings = append(warnings, fmt.Sprintf("tool %q: input schema: %s", t.Name, msg))
			}
			continue
		}
		seen[t.Name] = true
		i := sort.Search(len(kept), func(i int) bool { return kept[i].Name > t.Name })
		if i >= MaxMCPTools {
			continue
		}
		kept = slices.Insert(kept, i, t)
		if len(kept) > MaxMCPTools {
			kept = kept[:MaxMCPTools]
		}
	}
	if n := len(seen); n > MaxMCPTools {
		warnings = append(warnings, fmt.Sprintf("the server lists %d valid tools; only the first %d by name are offered", n, MaxMCPTools))
	}
	out := make(map[string]*mcp.Tool, len(kept))
	for _, t := range kept {
		out[t.Name] = t
	}
	return out, warnings, nil
}

// checkMCPSchema says what is wrong with a tool's input schema, "" when it can be offered: a
// JSON object of type "object" that compiles, of at most maxMCPSchema bytes.
func checkMCPSchema(schema any) string {
	raw, err := json.Marshal(schema)
	switch {
	case err != nil:
		return "not JSON"
	case len(raw) > maxMCPSchema:
		return fmt.Sprintf("%d bytes is over the limit of %d", len(raw), maxMCPSchema)
	}
	var top struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &top) != nil || top.Type != "object" {
		return `not an object schema ("type": "object")`
	}
	if _, err := toolschema.Compile(raw); err != nil {
		return err.Error()
	}
	return ""
}

// dropLocked closes the session (the next use opens another). The caller holds s.mu.
func (s *mcpSource) dropLocked() {
	if s.session != nil {
		_ = s.session.Close() // the session is being abandoned; its close error says nothing new
		s.session = nil
	}
}

// callTool calls the tool on the open session; when the server has forgotten the session
// (404 on its id, mcp.ErrSessionMissing) it opens another once and calls once more.
func (s *mcpSource) callTool(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	cs, _, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	res, err := cs.CallTool(ctx, params)
	if err == nil || ctx.Err() != nil {
		return res, err
	}
	s.mu.Lock()
	if s.session == cs {
		s.dropLocked() // a session that failed once is not used again
	}
	s.mu.Unlock()
	if !errors.Is(err, mcp.ErrSessionMissing) {
		s.setError(ctx, err)
		return nil, err
	}
	s.c.log.Info("mcp session expired; initializing again", "connection", s.cn.def.Name)
	if cs, _, err = s.ensure(ctx); err != nil {
		return nil, err
	}
	res, err = cs.CallTool(ctx, params)
	if err != nil {
		s.setError(ctx, err)
	}
	return res, err
}

func (s *mcpSource) setError(ctx context.Context, err error) {
	s.mu.Lock()
	s.status.Error = s.redact(ctx, err).Error()
	s.mu.Unlock()
}

// close closes the session.
func (s *mcpSource) close() {
	s.mu.Lock()
	s.dropLocked()
	s.mu.Unlock()
}

// mcpStatus returns a copy of the status.
func (s *mcpSource) mcpStatus() MCPStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Warnings = slices.Clone(st.Warnings)
	return st
}

// MCPStatus returns the state of mcp connection name for /health (ok false: not an mcp
// connection).
func (c *Client) MCPStatus(name string) (MCPStatus, bool) {
	cn := c.conns[name]
	if cn == nil || cn.mcp == nil {
		return MCPStatus{}, false
	}
	return cn.mcp.mcpStatus(), true
}

// IsMCP reports whether connection name is of format mcp.
func (c *Client) IsMCP(name string) bool {
	cn := c.conns[name]
	return cn != nil && cn.mcp != nil
}

// checkMCP is Check for an mcp connection: initialize (when no session is open) and
// tools/list.
func (c *Client) checkMCP(ctx context.Context, cn *conn) error {
	s := cn.mcp
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshLocked(ctx)
}

// mcpHeaders resolves the auth headers of an mcp connection (at every request, so that a
// rotated secret applies at once) and their redactor.
func (c *Client) mcpHeaders(ctx context.Context, cn *conn) (http.Header, *redactor, error) {
	h := http.Header{}
	var secrets []string
	if a := cn.def.Spec.Auth; a != nil {
		for _, k := range slices.Sorted(maps.Keys(a.Headers)) {
			v, err := c.authValue(ctx, "auth.headers."+k, a.Headers[k], nil)
			if err != nil {
				return nil, nil, fmt.Errorf("connection %s: %w", cn.def.Name, err)
			}
			h.Set(k, v)
			secrets = append(secrets, v)
		}
	}
	return h, cn.redactor(secrets), nil
}

// mcpPrefix is "<connection>__".
func mcpPrefix(conn string) string { return conn + agent.MCPToolSeparator }

// MCPToolRule is one tool of an mcp connection as the model is offered it, with the rule that
// applies to its calls.
type MCPToolRule struct {
	Tool     string `json:"tool"`      // <connection>__<tool>
	ReadOnly bool   `json:"read_only"` // the server's readOnlyHint
	Action   string `json:"action"`    // allow | confirm | deny
	Rule     string `json:"rule"`      // what decided it
}

// MCPToolRules lists the tools of mcp connection name from its cached list (nothing is fetched),
// each with its rule, sorted; false when name is not an mcp connection.
func (c *Client) MCPToolRules(name string) ([]MCPToolRule, bool) {
	cn := c.conns[name]
	if cn == nil || cn.mcp == nil {
		return nil, false
	}
	s := cn.mcp
	s.mu.Lock()
	listed := s.tools
	s.mu.Unlock()
	out := []MCPToolRule{}
	for _, n := range slices.Sorted(maps.Keys(listed)) {
		ro := listed[n].Annotations != nil && listed[n].Annotations.ReadOnlyHint
		v := cn.toolRules.decide(n, ro)
		out = append(out, MCPToolRule{Tool: mcpPrefix(cn.def.Name) + n, ReadOnly: ro, Action: v.action, Rule: v.rule})
	}
	return out, true
}
