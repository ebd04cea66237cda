package connections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/tools"
)

// mcpServer is an MCP server of the SDK on 127.0.0.1 that counts calls by tool and initialize
// requests, and can forget its sessions (forget).
type mcpServer struct {
	srv     *httptest.Server
	server  *mcp.Server
	handler atomic.Pointer[mcp.StreamableHTTPHandler]
	inits   atomic.Int64
	hits    atomic.Int64 // every HTTP request
	mu      sync.Mutex
	calls   map[string]int
}

func newMCPServer(t testing.TB) *mcpServer {
	t.Helper()
	s := &mcpServer{calls: map[string]int{}}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s.forget()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.handler.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// forget replaces the handler: the sessions the old one knew are unknown (404) from now on.
func (s *mcpServer) forget() {
	s.handler.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server }, nil))
}

// add adds a tool answering text(args, header) and counting its calls.
func (s *mcpServer) add(name string, readOnly bool, text func(args json.RawMessage, h http.Header) string) {
	tool := &mcp.Tool{Name: name, Description: "The " + name + " tool.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	if readOnly {
		tool.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
	}
	s.server.AddTool(tool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.mu.Lock()
		s.calls[name]++
		s.mu.Unlock()
		var h http.Header
		if req.Extra != nil {
			h = req.Extra.Header
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text(req.Params.Arguments, h)}}}, nil
	})
}

func (s *mcpServer) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

// mcpConn is an mcp connection named name to baseURL with a secret auth header.
func mcpConn(name, baseURL string, policy, access map[string]string) *agent.Connection {
	c := &agent.Connection{Name: name, Spec: agent.ConnectionSpec{BaseURL: baseURL, Format: agent.FormatMCP,
		Auth: &agent.ConnectionAuth{Headers: map[string]string{"Authorization": "env:API_TOKEN"}}}}
	if policy != nil {
		c.Policy = &agent.Policy{Tools: policy}
	}
	if access != nil {
		c.Access = &agent.Access{Tools: access}
	}
	return c
}

// mcpClient builds a Client over conns with the test secrets and resolver.
func mcpClient(t testing.TB, conns ...*agent.Connection) (*connections.Client, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	c, err := connections.New(conns, connections.Options{
		Secret: func(_ context.Context, name string) (string, bool, error) {
			if name == "API_TOKEN" {
				return secretToken, true, nil
			}
			return "", false, nil
		},
		Resolver: newResolver(),
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c, logs
}

// mcpTools lists the client's MCP tools by name.
func mcpTools(t testing.TB, c *connections.Client, names ...string) map[string]*connections.MCPTool {
	t.Helper()
	ts, err := c.MCPTools(context.Background(), names)
	if err != nil {
		t.Fatalf("MCPTools: %v", err)
	}
	out := map[string]*connections.MCPTool{}
	for _, tl := range ts {
		out[tl.Spec().Name] = tl.(*connections.MCPTool)
	}
	return out
}

func callMCP(tl tools.Tool, args string) (tools.Result, error) {
	return tl.Call(context.Background(), tools.Call{ID: "c1", Arguments: json.RawMessage(args), Session: tools.Session{ID: "s1"}})
}

// TestMCPRules: allow, confirm and deny by tool name, the readOnlyHint default; deny never
// reaches the server; the credential is sent and redacted from the result.
func TestMCPRules(t *testing.T) {
	s := newMCPServer(t)
	echoAuth := func(args json.RawMessage, h http.Header) string {
		return "args " + string(args) + " auth " + h.Get("Authorization")
	}
	for _, name := range []string{"lookup", "update", "wipe", "publish"} {
		s.add(name, name == "lookup", echoAuth)
	}
	c, _ := mcpClient(t, mcpConn("gh", s.srv.URL, map[string]string{"publish": "allow", "*": "confirm"}, map[string]string{"wipe": "deny"}))
	ts := mcpTools(t, c, "gh")
	if len(ts) != 4 {
		t.Fatalf("tools = %v, want 4", ts)
	}
	tests := []struct {
		tool    string
		approve bool
		deny    bool
	}{
		{"gh__lookup", true, false}, // policy "*": confirm is stricter than the readOnly default
		{"gh__update", true, false},
		{"gh__publish", false, false},
		{"gh__wipe", false, true},
	}
	for _, tc := range tests {
		tl := ts[tc.tool]
		if tl == nil {
			t.Fatalf("no tool %s", tc.tool)
		}
		req, err := tl.NeedsApproval(context.Background(), tools.Call{Arguments: json.RawMessage(`{}`)})
		if tc.deny {
			if err == nil || !strings.Contains(err.Error(), `access.json rule "tools": "wipe"`) {
				t.Errorf("%s: NeedsApproval err = %v, want the deny rule", tc.tool, err)
			}
		} else if (req != nil) != tc.approve || err != nil {
			t.Errorf("%s: NeedsApproval = %+v, %v; want approval %v", tc.tool, req, err, tc.approve)
		} else if req != nil && (req.Connection != "gh" || req.Endpoint != tc.tool || req.Method != "CALL") {
			t.Errorf("%s: approval request = %+v", tc.tool, req)
		}
	}
	if _, err := callMCP(ts["gh__wipe"], `{}`); err == nil {
		t.Fatal("a denied tool ran")
	}
	if n := s.count("wipe"); n != 0 {
		t.Errorf("the denied tool reached the server %d times", n)
	}
	res, err := callMCP(ts["gh__publish"], `{"q":"x"}`)
	if err != nil || res.IsError {
		t.Fatalf("publish: %+v, %v", res, err)
	}
	if !strings.Contains(res.Content, `args {"q":"x"}`) || strings.Contains(res.Content, "sk-test-TOKEN") || !strings.Contains(res.Content, connections.Redacted) {
		t.Errorf("result = %q: want the arguments and the credential redacted", res.Content)
	}
	if s.count("publish") != 1 {
		t.Errorf("publish calls = %d", s.count("publish"))
	}
}

// TestMCPDefaults: without rules a readOnlyHint tool is allowed and any other asks first.
func TestMCPDefaults(t *testing.T) {
	s := newMCPServer(t)
	s.add("lookup", true, func(json.RawMessage, http.Header) string { return "ok" })
	s.add("update", false, func(json.RawMessage, http.Header) string { return "ok" })
	c, _ := mcpClient(t, mcpConn("gh", s.srv.URL, nil, nil))
	ts := mcpTools(t, c, "gh")
	if req, err := ts["gh__lookup"].NeedsApproval(context.Background(), tools.Call{}); req != nil || err != nil {
		t.Errorf("lookup: %+v, %v; want allowed", req, err)
	}
	if req, err := ts["gh__update"].NeedsApproval(context.Background(), tools.Call{}); req == nil || err != nil {
		t.Errorf("update: %+v, %v; want asked", req, err)
	}
	// In an eval, a tool without readOnlyHint is a write: refused unless the eval allows it.
	eval := tools.Call{Session: tools.Session{Eval: &tools.EvalPolicy{}}}
	if _, err := ts["gh__update"].Call(context.Background(), eval); err == nil || !strings.Contains(err.Error(), "Allow writes: gh") {
		t.Errorf("eval write: %v", err)
	}
	eval.Session.Eval.AllowWrites = []string{"gh"}
	if req, err := ts["gh__update"].NeedsApproval(context.Background(), eval); req != nil || err != nil {
		t.Errorf("eval allowed write: %+v, %v; want no question", req, err)
	}
	if s.count("update") != 0 {
		t.Error("a refused eval write reached the server")
	}
}

// TestMCPManyTools: a server listing 10,000 tools (and some bad ones) offers the first 128
// valid ones by name, says so on its status and in the logs, and does not fail.
func TestMCPManyTools(t *testing.T) {
	s := newMCPServer(t)
	for i := range 10_000 {
		s.server.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%05d", 9_999-i), InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	s.server.AddTool(&mcp.Tool{Name: "a.bad.name", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	s.server.AddTool(&mcp.Tool{Name: "a_bad_schema", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"nosuchtype"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	c, logs := mcpClient(t, mcpConn("big", s.srv.URL, nil, nil))
	ts := mcpTools(t, c, "big")
	if len(ts) != connections.MaxMCPTools {
		t.Fatalf("tools = %d, want %d", len(ts), connections.MaxMCPTools)
	}
	if ts["big__t00000"] == nil || ts["big__t00127"] == nil || ts["big__t00128"] != nil {
		t.Error("want the first 128 by name")
	}
	st, ok := c.MCPStatus("big")
	if !ok || !st.Listed || st.Tools != connections.MaxMCPTools {
		t.Errorf("status = %+v", st)
	}
	all := strings.Join(st.Warnings, "\n")
	for _, want := range []string{"only the first 128", `"a.bad.name"`, `"a_bad_schema"`} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", all, want)
		}
	}
	if !strings.Contains(logs.String(), "only the first 128") {
		t.Error("no warning in the logs")
	}
}

// TestMCPBigResult: a 10 MB result is refused with an error result, never read whole, and the
// connection still works; a result over MaxBodyBytes is cut with a marker.
func TestMCPBigResult(t *testing.T) {
	s := newMCPServer(t)
	s.add("huge", true, func(json.RawMessage, http.Header) string { return strings.Repeat("x", 10<<20) })
	s.add("large", true, func(json.RawMessage, http.Header) string { return strings.Repeat("y", 200<<10) })
	s.add("small", true, func(json.RawMessage, http.Header) string { return "small" })
	c, _ := mcpClient(t, mcpConn("files", s.srv.URL, nil, nil))
	ts := mcpTools(t, c, "files")
	_, err := callMCP(ts["files__huge"], `{}`)
	if err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("huge: err = %v, want over the limit", err)
	}
	res, err := callMCP(ts["files__large"], `{}`)
	if err != nil || len(res.Content) > connections.MaxBodyBytes+200 || !strings.Contains(res.Content, "[svc: body cut") {
		t.Fatalf("large: %d bytes, %v; want cut", len(res.Content), err)
	}
	if res, err := callMCP(ts["files__small"], `{}`); err != nil || res.Content != "small" {
		t.Fatalf("small after huge: %q, %v", res.Content, err)
	}
}

// TestMCPSessionDropped: a server that forgets the session (404 on its id) gets one new
// initialize, and the call succeeds.
func TestMCPSessionDropped(t *testing.T) {
	s := newMCPServer(t)
	s.add("ping", true, func(json.RawMessage, http.Header) string { return "pong" })
	s.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" {
				s.inits.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	c, _ := mcpClient(t, mcpConn("p", s.srv.URL, nil, nil))
	ts := mcpTools(t, c, "p")
	if res, err := callMCP(ts["p__ping"], `{}`); err != nil || res.Content != "pong" {
		t.Fatalf("first call: %q, %v", res.Content, err)
	}
	s.forget()
	if res, err := callMCP(ts["p__ping"], `{}`); err != nil || res.Content != "pong" {
		t.Fatalf("call after the server forgot the session: %q, %v", res.Content, err)
	}
	if n := s.inits.Load(); n != 2 {
		t.Errorf("initialize requests = %d, want 2", n)
	}
	if n := s.count("ping"); n != 2 {
		t.Errorf("ping calls = %d, want 2", n)
	}
}

// TestMCPMetadataAddress: a baseUrl that resolves to the metadata address, or is it, is
// refused as the request tool refuses it; nothing is sent.
func TestMCPMetadataAddress(t *testing.T) {
	s := newMCPServer(t)
	s.add("ping", true, func(json.RawMessage, http.Header) string { return "pong" })
	port := s.srv.URL[strings.LastIndex(s.srv.URL, ":"):]
	c, _ := mcpClient(t, mcpConn("meta", "http://metadata.test"+port+"/", nil, nil))
	ts, err := c.MCPTools(context.Background(), []string{"meta"})
	if !errors.Is(err, connections.ErrForbiddenAddress) || len(ts) != 0 {
		t.Fatalf("MCPTools = %d tools, %v; want ErrForbiddenAddress", len(ts), err)
	}
	if st, _ := c.MCPStatus("meta"); st.Listed || !strings.Contains(st.Error, "not allowed") {
		t.Errorf("status = %+v", st)
	}
	if _, err := connections.New([]*agent.Connection{mcpConn("lit", "http://169.254.169.254/mcp", nil, nil)}, connections.Options{}); !errors.Is(err, connections.ErrForbiddenAddress) {
		t.Errorf("literal metadata address: err = %v", err)
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// TestMCPListChanged: notifications/tools/list_changed makes the next use list again.
func TestMCPListChanged(t *testing.T) {
	s := newMCPServer(t)
	s.add("one", true, func(json.RawMessage, http.Header) string { return "1" })
	c, _ := mcpClient(t, mcpConn("lc", s.srv.URL, nil, nil))
	if ts := mcpTools(t, c, "lc"); len(ts) != 1 {
		t.Fatalf("tools = %d", len(ts))
	}
	s.add("two", true, func(json.RawMessage, http.Header) string { return "2" }) // notifies the session
	// The notification travels on the session's stream: wait for it by listing until it shows
	// (each use lists again only once it arrived).
	for range 500 {
		if ts := mcpTools(t, c, "lc"); len(ts) == 2 {
			return
		}
		if res, err := callMCP(mcpTools(t, c, "lc")["lc__one"], `{}`); err != nil || res.Content != "1" {
			t.Fatalf("one: %q, %v", res.Content, err)
		}
	}
	t.Fatal("the new tool never showed")
}

// TestMCPConnectionRules: New refuses endpoint rules on an mcp connection and the request tool
// refuses an mcp connection.
func TestMCPConnectionRules(t *testing.T) {
	bad := mcpConn("m", "http://127.0.0.1:1/mcp", nil, nil)
	bad.Policy = &agent.Policy{Endpoints: map[string]agent.EndpointRule{"GET /a": {}}}
	if _, err := connections.New([]*agent.Connection{bad}, connections.Options{}); err == nil || !strings.Contains(err.Error(), `"tools" rules, not "endpoints"`) {
		t.Errorf("endpoints on mcp: %v", err)
	}
	if _, err := connections.New([]*agent.Connection{mcpConn("m", "http://127.0.0.1:1/mcp", map[string]string{"x": "maybe"}, nil)}, connections.Options{}); err == nil || !strings.Contains(err.Error(), "tools.x must be one of allow, confirm, deny") {
		t.Errorf("bad tools rule: %v", err)
	}
	rest := conn("r", nil, nil)
	c, _ := mcpClient(t, rest, mcpConn("m", "http://127.0.0.1:1/mcp", nil, nil))
	if _, err := c.Tool([]string{"r", "m"}); err == nil || !strings.Contains(err.Error(), "MCP server") {
		t.Errorf("request tool over an mcp connection: %v", err)
	}
	if got := c.RESTNames(); len(got) != 1 || got[0] != "r" {
		t.Errorf("RESTNames = %v", got)
	}
}
