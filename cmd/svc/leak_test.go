package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/client"
)

// TestNoSecretsInLogs runs svc up at debug level through a chat with a runtime token, an agent
// secret and metadata, then reads every log line: no token, secret or metadata value is there.
func TestNoSecretsInLogs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out string
	var wg sync.WaitGroup
	wg.Go(func() {
		var err error
		out, err = execute(ctx, "up", "--data-dir", dataDir, "--addr", addr, "--log-level", "debug", "--log-format", "json")
		if err != nil {
			t.Errorf("svc up: %v", err)
		}
	})
	p := &benchPlatform{url: "http://" + addr}
	for deadline := time.Now().Add(time.Minute); p.token == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("svc up did not start:\n%s", out)
		}
		if resp, err := http.Get(p.url + "/health"); err == nil {
			resp.Body.Close()
			if b, err := os.ReadFile(filepath.Join(dataDir, "admin-token")); err == nil {
				p.token = strings.TrimSpace(string(b))
			}
		}
	}

	const secret, meta = "sk-secret-value-9c1f", "meta-value-7e2a"
	a := newAgent(t, p, "quiet", true)
	if status := p.call(t, "PUT", "/api/agents/"+a.AgentID+"/secrets/OPENAI_API_KEY", map[string]string{"value": secret}, nil, nil); status != http.StatusNoContent {
		t.Fatalf("put secret: %d", status)
	}
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	tok, err := admin(p).MintRuntimeToken(context.Background(), a.AgentID, client.TokenRequest{UserID: "user-1"})
	if err != nil {
		t.Fatal(err)
	}
	status, answer := agentPost(t, p, "quiet", "/chat/sync", tok.Token, map[string]any{"message": "hi", "metadata": map[string]string{"userId": meta}})
	if status != 200 {
		t.Fatalf("chat: %d %v", status, answer)
	}
	agentPost(t, p, "quiet", "/feedback", tok.Token, map[string]any{"session_id": answer["session_id"], "rating": "up"})
	agentPost(t, p, "quiet", "/chat/sync", "rt_wrong-token-value", map[string]any{"message": "hi"}) // a refused token is logged as refused, not shown

	cancel()
	wg.Wait()
	// The log lines, not svc up's banner on stdout, which shows a first admin token once by design.
	var logs strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "{") {
			logs.WriteString(line + "\n")
		}
	}
	if !strings.Contains(logs.String(), `"msg"`) {
		t.Fatalf("no log lines captured:\n%s", out)
	}
	for what, v := range map[string]string{"admin token": p.token, "runtime token": tok.Token, "agent secret": secret, "metadata value": meta, "refused token": "rt_wrong-token-value"} {
		if strings.Contains(logs.String(), v) {
			t.Errorf("the %s appears in the logs", what)
		}
	}
}
