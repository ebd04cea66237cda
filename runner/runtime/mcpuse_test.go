package runtime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/runtime"
)

// TestMCPConnectionTools runs an MCP server's tools through a deployment with the echo model:
// gh__lookup (readOnlyHint) runs at once, gh__update asks the user first and runs once
// approved, gh__wipe (access.json deny) never reaches the server; the credential reaches the
// server and not the frames; /health reports the server's tools.
func TestMCPConnectionTools(t *testing.T) {
	const token = "Bearer sk-mcp-SECRET-51c9e"
	var mu sync.Mutex
	calls := map[string]int{}
	server := mcp.NewServer(&mcp.Implementation{Name: "gh", Version: "1"}, nil)
	add := func(name string, readOnly bool) {
		tool := &mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
		if readOnly {
			tool.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		}
		server.AddTool(tool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			calls[name]++
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " done " + string(req.Params.Arguments) + " as " + req.Extra.Header.Get("Authorization")}}}, nil
		})
	}
	add("lookup", true)
	add("update", false)
	add("wipe", false)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close) // after the runtime's Close (cleanups run last first), which ends the session's stream

	ag := loadAgent(t, "hello")
	if ag.Connections == nil {
		ag.Connections = map[string]*agent.Connection{}
	}
	ag.Connections["gh"] = &agent.Connection{Name: "gh",
		Spec:    agent.ConnectionSpec{BaseURL: "env:GH_MCP_URL", Format: agent.FormatMCP, Auth: &agent.ConnectionAuth{Headers: map[string]string{"Authorization": "env:GH_TOKEN"}}},
		Access:  &agent.Access{Tools: map[string]string{"wipe": "deny"}},
		Surface: "Issues of the team's GitHub organisation.",
	}
	if na := ag.DefaultAgent(); na != nil {
		na.Connections = append(na.Connections, "gh")
	}
	env := map[string]string{"GH_MCP_URL": srv.URL, "GH_TOKEN": token}
	e := start(t, runtime.Options{
		Agent: ag, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"},
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	var all strings.Builder
	keep := func(fs []frame) []frame {
		for _, f := range fs {
			all.WriteString(f.Raw + "\n")
		}
		return fs
	}

	fs := keep(e.chat("", map[string]any{"message": `/tool gh__lookup {"q": "vpn"}`, "session_id": "ses_mcp"}))
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "success" || !strings.Contains(str(res[0].Data["content"]), `lookup done {"q":"vpn"}`) {
		t.Fatalf("lookup: %v", fs)
	}
	s := e.open(t, map[string]any{"message": `/tool gh__update {"q": "close"}`, "session_id": "ses_mcp"})
	c := s.until("confirmation_required").Data
	if c["connection_name"] != "gh" || c["tool_name"] != "gh__update" || c["method"] != "CALL" {
		t.Errorf("confirmation_required %v", c)
	}
	mu.Lock()
	before := calls["update"]
	mu.Unlock()
	if before != 0 {
		t.Fatal("update ran before its approval")
	}
	if r := e.answer("ses_mcp", str(c["correlation_id"]), true); r.Status != http.StatusOK {
		t.Fatalf("answer: %d %s", r.Status, r.Body)
	}
	if res := s.until("tool_call_result").Data; res["status"] != "success" || !strings.Contains(str(res["content"]), "update done") {
		t.Errorf("update: %v", res)
	}
	s.until("done")
	for _, f := range s.all {
		all.WriteString(f.Raw + "\n")
	}
	fs = keep(e.chat("", map[string]any{"message": `/tool gh__wipe {}`, "session_id": "ses_mcp"}))
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "error" || len(ofType(fs, "confirmation_required")) != 0 {
		t.Errorf("wipe: %v", types(fs))
	}
	mu.Lock()
	if calls["wipe"] != 0 || calls["lookup"] != 1 || calls["update"] != 1 {
		t.Errorf("the server got %v", calls)
	}
	mu.Unlock()
	if strings.Contains(all.String(), "SECRET-51c9e") {
		t.Error("the credential appears in the frames")
	}
	// /health reports the server (its check runs at start, on its own).
	deadline := time.Now().Add(10 * time.Second)
	for {
		hr := e.do("GET", "/health", "", nil)
		st, _ := hr.JSON["connections"].(map[string]any)["gh"].(map[string]any)
		if m, _ := st["mcp"].(map[string]any); st["status"] == "ok" && m["listed"] == true && m["tools"] == float64(3) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health: %s", hr.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The system prompt carries the server's surface.md; /inspect/connections shows its tools
	// with the rule each follows.
	ctxr := e.do("GET", "/inspect/context", "", nil)
	if !strings.Contains(string(ctxr.Body), "## MCP servers") || !strings.Contains(string(ctxr.Body), "Issues of the team") {
		t.Errorf("inspect/context lacks the MCP server's surface: %s", ctxr.Body)
	}
	ins := e.do("GET", "/inspect/connections/gh", "", nil)
	var got struct {
		Rules struct {
			Tools []struct{ Tool, Action string }
		}
		MCP struct{ Listed bool }
	}
	_ = json.Unmarshal(ins.Body, &got)
	want := map[string]string{"gh__lookup": "allow", "gh__update": "confirm", "gh__wipe": "deny"}
	for _, tl := range got.Rules.Tools {
		if want[tl.Tool] == tl.Action {
			delete(want, tl.Tool)
		}
	}
	if ins.Status != 200 || !got.MCP.Listed || len(want) != 0 {
		t.Errorf("inspect/connections/gh = %d %s", ins.Status, ins.Body)
	}
}

// TestMCPConnectionDown: a server that cannot be reached at load offers no tools; the runtime
// starts and /health says why.
func TestMCPConnectionDown(t *testing.T) {
	ag := loadAgent(t, "hello")
	if ag.Connections == nil {
		ag.Connections = map[string]*agent.Connection{}
	}
	ag.Connections["down"] = &agent.Connection{Name: "down", Spec: agent.ConnectionSpec{BaseURL: "http://127.0.0.1:1/mcp", Format: agent.FormatMCP}}
	if na := ag.DefaultAgent(); na != nil {
		na.Connections = append(na.Connections, "down")
	}
	e := start(t, runtime.Options{Agent: ag, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	fs := e.chat("", map[string]any{"message": `/tool down__ping {}`, "session_id": "ses_down"})
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "error" {
		t.Fatalf("call: %v", types(fs))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		hr := e.do("GET", "/health", "", nil)
		st, _ := hr.JSON["connections"].(map[string]any)["down"].(map[string]any)
		if m, _ := st["mcp"].(map[string]any); st["status"] == "error" && m["listed"] == false && strings.Contains(str(st["error"]), "initialize") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health: %s", hr.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMCPConnectionToolsChange: a tool the server adds while the deployment runs (it sends
// notifications/tools/list_changed) reaches the model in the turns that follow, without a
// redeploy; one it removes goes.
func TestMCPConnectionToolsChange(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	add := func(name string) {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran"}}}, nil
			})
	}
	add("search")
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	ag := loadAgent(t, "hello")
	if ag.Connections == nil {
		ag.Connections = map[string]*agent.Connection{}
	}
	ag.Connections["kb"] = &agent.Connection{Name: "kb", Spec: agent.ConnectionSpec{BaseURL: srv.URL, Format: agent.FormatMCP}}
	if na := ag.DefaultAgent(); na != nil {
		na.Connections = append(na.Connections, "kb")
	}
	e := start(t, runtime.Options{Agent: ag, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	ran := func(tool string) bool {
		fs := e.chat("", map[string]any{"message": "/tool " + tool + " {}"})
		res := ofType(fs, "tool_call_result")
		return len(res) == 1 && res[0].Data["status"] == "success" && strings.Contains(str(res[0].Data["content"]), "ran")
	}
	if !ran("kb__search") || ran("kb__fetch") {
		t.Fatal("at load: want kb__search and no kb__fetch")
	}
	add("fetch")
	server.RemoveTools("search")
	for deadline := time.Now().Add(10 * time.Second); !ran("kb__fetch"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tool the server added never reached the model")
		}
	}
	if ran("kb__search") {
		t.Fatal("the tool the server removed is still offered")
	}
}
