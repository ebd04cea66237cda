package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/agent/agenttest"
)

// TestUpOnBusyPortLeavesNothing: svc up on a port in use fails naming SVC_ADDR before it creates
// the data dir, a database or an admin token.
func TestUpOnBusyPortLeavesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dataDir := filepath.Join(t.TempDir(), "data")
	out, err := execute(context.Background(), "up", "--data-dir", dataDir, "--addr", ln.Addr().String(), "--log-level", "error")
	if err == nil || !strings.Contains(err.Error(), "SVC_ADDR") {
		t.Fatalf("svc up on a busy port = %v\n%s", err, out)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("the data dir exists after the failed start: %v", err)
	}
}

// TestRuntimeTokensDieWithTheirMinter: a runtime token minted with an operator token stops
// working once that token is revoked, and says why.
func TestRuntimeTokensDieWithTheirMinter(t *testing.T) {
	p := startPlatform(t)
	var a struct{ AgentID, Slug string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": "revoked"}, nil, &a)
	files := agenttest.Files(t, "hello")
	var sv struct{ SourceVersionID string }
	p.call(t, "POST", "/api/agents/"+a.AgentID+"/source-versions", map[string]any{"files": files}, nil, &sv)
	var rd struct{ DeployID string }
	p.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": a.AgentID, "environment": "preview", "sourceVersionId": sv.SourceVersionID}, nil, &rd)
	var op struct{ ID, Token string }
	if s := p.call(t, "POST", "/api/tokens", map[string]any{"name": "ci", "kind": "operator", "agentId": a.AgentID}, nil, &op); s != 201 || op.Token == "" {
		t.Fatalf("create an operator token = %d %+v", s, op)
	}
	var rt struct{ Token string }
	if s := p.call(t, "POST", "/api/agents/"+a.AgentID+"/tokens", map[string]any{}, map[string]string{"Authorization": "Bearer " + op.Token}, &rt); s != 201 {
		t.Fatalf("mint with the operator token = %d", s)
	}
	history := func() (int, string) {
		req, _ := http.NewRequest("GET", p.url+"/sessions/history", nil)
		req.Host = rd.DeployID + "--" + a.Slug + ".apps.localhost"
		req.Header.Set("Authorization", "Bearer "+rt.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Message string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Message
	}
	deadline := time.Now().Add(time.Minute)
	for s, _ := history(); s != 200; s, _ = history() {
		if time.Now().After(deadline) {
			t.Fatalf("history with a fresh runtime token = %d", s)
		}
		time.Sleep(10 * time.Millisecond) // the build is still running
	}
	if s := p.call(t, "DELETE", "/api/tokens/"+op.ID, nil, nil, nil); s != 204 {
		t.Fatalf("revoke = %d", s)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		s, msg := history()
		if s == 401 && strings.Contains(msg, "was revoked") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history after the minter was revoked = %d %q, want 401 saying it was revoked", s, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAgentsCreateRefusesASecondOfTheSameName: a second `svc agents create NAME` is refused,
// naming the agent that exists, instead of quietly creating NAME-2; --slug makes it deliberate.
func TestAgentsCreateRefusesASecondOfTheSameName(t *testing.T) {
	p := startPlatform(t)
	ctx := context.Background()
	args := func(extra ...string) []string {
		return append([]string{"agents", "create", "greeter", "--url", p.url, "--token", p.token}, extra...)
	}
	if out, err := execute(ctx, args()...); err != nil {
		t.Fatalf("first create: %v\n%s", err, out)
	}
	out, err := execute(ctx, args()...)
	if err == nil || !strings.Contains(err.Error(), `an agent named "greeter" exists already`) || !strings.Contains(err.Error(), "--slug") {
		t.Fatalf("second create = %v\n%s", err, out)
	}
	if out, err := execute(ctx, args("--slug", "greeter-two")...); err != nil || !strings.Contains(out, "agent greeter-two") {
		t.Fatalf("create with --slug = %v\n%s", err, out)
	}
}

// TestDeployShowsProgressAndSaysWhenTheStreamIsCut: the upload prints its progress, and when the
// connection breaks while the build log streams, the CLI says the build goes on and how to follow
// it again, not "unexpected EOF".
func TestDeployShowsProgressAndSaysWhenTheStreamIsCut(t *testing.T) {
	p := startPlatform(t)
	target, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") != "1" {
			proxy.ServeHTTP(w, r)
			return
		}
		// The server dies in the middle of the log: a chunk, then the connection closes.
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nstart\n\r\n")
		_ = buf.Flush()
		_ = conn.Close()
	}))
	defer front.Close()
	ctx := context.Background()
	if out, err := execute(ctx, "agents", "create", "cut", "--url", front.URL, "--token", p.token); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	out, err := execute(ctx, "deploy", "--agent", "cut", "--dir", filepath.Join("..", "..", "examples", "greeter"), "--env", "preview", "--wait", "--url", front.URL, "--token", p.token)
	if !strings.Contains(out, "Packing ") || !strings.Contains(out, "Uploading ") || !strings.Contains(out, " 100%") {
		t.Errorf("deploy printed no upload progress:\n%s", out)
	}
	if err == nil || strings.HasSuffix(err.Error(), "unexpected EOF") || !strings.Contains(err.Error(), "the build goes on") || !strings.Contains(err.Error(), "svc logs ") {
		t.Fatalf("deploy with a cut log stream = %v\n%s", err, out)
	}
}
