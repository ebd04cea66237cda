package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostBearer sends every request of an MCP client to host with a bearer credential, as a client
// that resolved the agent's URL would.
type hostBearer struct{ host, token string }

func (h hostBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	r.Header.Set("Authorization", "Bearer "+h.token)
	return http.DefaultTransport.RoundTrip(r)
}

func askOver(t *testing.T, p *benchPlatform, host, token, message string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: hostBearer{host: host, token: token}}}, nil)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"message": message}})
	if err != nil {
		return "", err
	}
	if len(res.Content) == 0 {
		return "", nil
	}
	tc, _ := res.Content[0].(*mcp.TextContent)
	return tc.Text, nil
}

// On svc up, the agent's persistent and pinned URLs serve /mcp to one of its API keys; another
// agent's key is refused, and so is the key once revoked.
func TestMCPOnThePlatform(t *testing.T) {
	p := startPlatform(t)
	agentID, slug, deployID, _ := upAgent(t, p, "mcp-one", "hello", "")
	otherID, _, _, _ := upAgent(t, p, "mcp-two", "hello", "")
	var key, other struct{ ID, Key string }
	p.call(t, "POST", "/api/agents/"+agentID+"/api-keys", map[string]any{"name": "desktop"}, nil, &key)
	p.call(t, "POST", "/api/agents/"+otherID+"/api-keys", map[string]any{"name": "desktop"}, nil, &other)

	for _, host := range []string{slug + ".apps.localhost", deployID + "--" + slug + ".apps.localhost"} {
		text, err := askOver(t, p, host, key.Key, "hello over mcp")
		if err != nil || !strings.Contains(text, "hello over mcp") {
			t.Fatalf("ask on %s = %q, %v", host, text, err)
		}
	}
	if _, err := askOver(t, p, slug+".apps.localhost", other.Key, "hi"); err == nil {
		t.Fatal("another agent's key was let in")
	}
	if s := p.call(t, "DELETE", "/api/agents/"+agentID+"/api-keys/"+key.ID, nil, nil, nil); s != 204 {
		t.Fatalf("revoke = %d", s)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := askOver(t, p, slug+".apps.localhost", key.Key, "hi"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a revoked key still opens an MCP session")
		}
	}
}
