package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/agent/agenttest"
	"svc/runner/runtime"
)

// bearer adds an Authorization header to every request of an MCP client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// mcpClient connects the SDK's client to e's /mcp with token; the session ends with the test.
func mcpClient(t *testing.T, e *env, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: e.srv.Client().Transport}}}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// call calls a tool and decodes its structured result.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, map[string]any, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
	}
	return text.String(), out, res.IsError
}

// Through the SDK's own client, with an API key: the tools, two messages of one session, a tool
// call that needs approval answered with the answer tool.
func TestMCPSessionWithApproval(t *testing.T) {
	keys := newKeys(t)
	key := keys.create(t, "ag_mcp")
	tool := &guardedTool{name: "refund"}
	e := approvalRuntime(t, tool, runtime.Options{AgentID: "ag_mcp", Keys: keys.checker})
	cs, err := mcpClient(t, e, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "answer,ask,ask_default" {
		t.Fatalf("tools = %v, want answer, ask, ask_default (hello has one named agent)", names)
	}

	text, out, isErr := call(t, cs, "ask", map[string]any{"message": "hello there"})
	session := str(out["session_id"])
	if isErr || !strings.Contains(text, "hello there") || session == "" || out["done_reason"] != "model_stop" {
		t.Fatalf("first ask = %q %v (error %v)", text, out, isErr)
	}
	text, out, _ = call(t, cs, "ask", map[string]any{"message": "again", "session_id": session})
	if str(out["session_id"]) != session || !strings.Contains(text, "again") {
		t.Fatalf("second ask = %q %v, want the same session %s", text, out, session)
	}
	hist := e.do("GET", "/sessions/history/"+session, key, nil)
	if hist.Status != 200 || strings.Count(string(hist.Body), `"role":"user"`) != 2 {
		t.Fatalf("history = %d %s, want two user messages", hist.Status, string(hist.Body))
	}

	text, out, _ = call(t, cs, "ask", map[string]any{"message": `/tool refund {"order": 7}`, "session_id": session})
	pending, _ := out["pending"].([]any)
	if len(pending) != 1 || out["done_reason"] != nil || tool.calls.Load() != 0 || !strings.Contains(text, "answer tool") {
		t.Fatalf("ask with a guarded tool = %q %v, calls %d; want one pending approval and no call", text, out, tool.calls.Load())
	}
	p := pending[0].(map[string]any)
	if p["tool"] != "refund" || !strings.HasPrefix(str(p["correlation_id"]), "apr_") {
		t.Fatalf("pending = %v", p)
	}
	_, out, _ = call(t, cs, "answer", map[string]any{"session_id": session, "correlation_id": p["correlation_id"], "approved": true})
	if out["done_reason"] != "model_stop" || tool.calls.Load() != 1 {
		t.Fatalf("answer = %v, calls %d; want the turn complete after one call", out, tool.calls.Load())
	}
	text, _, isErr = call(t, cs, "answer", map[string]any{"session_id": session, "correlation_id": p["correlation_id"], "approved": true})
	if !isErr || !strings.Contains(text, "already") {
		t.Fatalf("second answer = %q (error %v), want already decided", text, isErr)
	}
}

// A client that supports elicitation is asked in the same tool call, and its answer decides.
func TestMCPApprovalByElicitation(t *testing.T) {
	for _, approve := range []bool{true, false} {
		tool := &guardedTool{name: "refund"}
		e := approvalRuntime(t, tool, runtime.Options{})
		var asked atomic.Int32
		cs, err := mcpClient(t, e, "", &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Add(1)
				if !strings.Contains(req.Params.Message, "refund") {
					t.Errorf("elicitation message %q does not name the tool", req.Params.Message)
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"message": `/tool refund {"order": 7}`}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cs.CallTool(ctx, params)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var want int32
		if approve {
			want = 1
		}
		if asked.Load() != 1 || tool.calls.Load() != want || !strings.Contains(string(b), `"done_reason":"model_stop"`) {
			t.Fatalf("approve %v: asked %d, calls %d, result %s", approve, asked.Load(), tool.calls.Load(), b)
		}
	}
}

// Text deltas go out as progress notifications of the call that asked for them.
func TestMCPProgress(t *testing.T) {
	e := approvalRuntime(t, &guardedTool{name: "refund"}, runtime.Options{})
	var deltas atomic.Int32
	var text strings.Builder
	got := make(chan struct{}, 64)
	cs, err := mcpClient(t, e, "", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.ProgressToken == "p1" {
				deltas.Add(1)
				text.WriteString(req.Params.Message)
				got <- struct{}{}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"message": "one two three four"}}
	params.SetProgressToken("p1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	select { // notifications and the result travel on one stream: the first came before the result
	case <-got:
	case <-ctx.Done():
		t.Fatal("no progress notification")
	}
	if deltas.Load() == 0 {
		t.Fatal("no progress notification")
	}
}

// Without a credential: 401 with the RFC 9728 challenge, and the metadata it names is served;
// another agent's key and a revoked key are refused the same way; a validation error names the
// field in the tool result.
func TestMCPRefusals(t *testing.T) {
	keys := newKeys(t)
	mine, other, revoked := keys.create(t, "ag_mcp"), keys.create(t, "ag_other"), keys.create(t, "ag_mcp")
	keys.revoke(t, revoked)
	e := approvalRuntime(t, &guardedTool{name: "refund"}, runtime.Options{AgentID: "ag_mcp", Keys: keys.checker})

	r := e.do("POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{}})
	challenge := r.Header.Get("WWW-Authenticate")
	if r.Status != 401 || !strings.Contains(challenge, `resource_metadata="http://`) || !strings.HasSuffix(challenge, `/.well-known/oauth-protected-resource"`) {
		t.Fatalf("no credential = %d %q", r.Status, challenge)
	}
	md := e.do("GET", "/.well-known/oauth-protected-resource", "", nil)
	var meta map[string]any
	_ = json.Unmarshal(md.Body, &meta)
	if md.Status != 200 || !strings.HasSuffix(str(meta["resource"]), "/mcp") || !strings.Contains(string(md.Body), `"bearer_methods_supported":["header"]`) {
		t.Fatalf("metadata = %d %s", md.Status, string(md.Body))
	}
	for name, token := range map[string]string{"another agent's key": other, "a revoked key": revoked, "garbage": "ak_nope"} {
		if _, err := mcpClient(t, e, token, nil); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("%s: connect = %v, want 401", name, err)
		}
	}
	cs, err := mcpClient(t, e, mine, nil)
	if err != nil {
		t.Fatal(err)
	}
	text, _, isErr := call(t, cs, "ask", map[string]any{"message": ""})
	if !isErr || !strings.Contains(text, "message") {
		t.Fatalf("empty message = %q (error %v)", text, isErr)
	}
	text, _, isErr = call(t, cs, "ask", map[string]any{"message": "hi", "session_id": "ses_nobody"})
	if isErr || !strings.Contains(text, "hi") {
		t.Fatalf("a new session id = %q (error %v)", text, isErr)
	}
}

// BenchmarkMCPAsk compares one ask over /mcp (the SDK's client, one MCP session for the whole run)
// with the same turn over /chat/sync, alternating them in each iteration against the fake OpenAI
// server (32 text chunks), each turn in a fresh session of the hello agent: p50 of each and the
// difference. A third leg posts the same tools/call on that MCP session with net/http and reads
// the answer to its end, as the /chat/sync leg does: the server's extra without the SDK client's.
//
//	go test -run '^$' -bench BenchmarkMCPAsk -benchtime 3000x ./runner/runtime/
func BenchmarkMCPAsk(b *testing.B) {
	e := benchRuntime(b, nil, nil)
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: e.srv.Client(), DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	client := e.srv.Client()
	rawBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"message":"Say hello"}}}`)
	raw := func() {
		req, _ := http.NewRequest("POST", e.url+"/mcp", bytes.NewReader(rawBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "ask")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"done_reason":"model_stop"`)) {
			b.Fatalf("raw ask = %d %s", resp.StatusCode, body)
		}
	}
	var syncLat, mcpLat, rawLat []time.Duration
	for b.Loop() {
		start := time.Now()
		resp, err := client.Post(e.url+"/chat/sync", "application/json", strings.NewReader(`{"message":"Say hello"}`))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		syncLat = append(syncLat, time.Since(start))
		start = time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"message": "Say hello"}})
		if err != nil || res.IsError {
			b.Fatalf("ask: %v %v", err, res)
		}
		mcpLat = append(mcpLat, time.Since(start))
		start = time.Now()
		raw()
		rawLat = append(rawLat, time.Since(start))
	}
	p50 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	s, m, r := p50(syncLat), p50(mcpLat), p50(rawLat)
	b.ReportMetric(float64(s.Microseconds())/1000, "sync-p50-ms")
	b.ReportMetric(float64(m.Microseconds())/1000, "mcp-p50-ms")
	b.ReportMetric(float64((m-s).Microseconds())/1000, "mcp-extra-p50-ms")
	b.ReportMetric(float64((r-s).Microseconds())/1000, "mcp-http-extra-p50-ms")
}

// svc dev serves /mcp too, behind its AUTH_TOKEN.
func TestMCPUnderDev(t *testing.T) {
	rt, _, err := runtime.NewDev(runtime.DevOptions{Dir: agenttest.Dir(t, "hello"), AuthToken: "tok", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(func() {
		srv.Close()
		if err := rt.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	e := &env{t: t, rt: rt, srv: srv, url: srv.URL}
	if _, err := mcpClient(t, e, "wrong", nil); err == nil {
		t.Fatal("a wrong AUTH_TOKEN was let in")
	}
	cs, err := mcpClient(t, e, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	if text, _, isErr := call(t, cs, "ask", map[string]any{"message": "hi"}); isErr || text != "echo: hi" {
		t.Fatalf("ask = %q (error %v)", text, isErr)
	}
}
