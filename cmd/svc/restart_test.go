package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRestartLosesNothing stops svc up and starts it again on the same data dir: the agent, its
// active deployment, the URLs and a conversation all carry on, and the admin token still works.
func TestRestartLosesNothing(t *testing.T) {
	dataDir := t.TempDir()
	p := startPlatformAt(t, dataDir)
	agentID, slug, deployID, _ := upAgent(t, p, "keeper", "hello", "")
	chat := func(p *benchPlatform, session, message string) (string, string) {
		t.Helper()
		var tok struct{ Token string }
		p.call(t, "POST", "/api/agents/"+agentID+"/tokens", map[string]any{}, nil, &tok)
		body, _ := json.Marshal(map[string]any{"message": message, "session_id": session})
		req, _ := http.NewRequest("POST", p.url+"/chat/sync", strings.NewReader(string(body)))
		req.Host = slug + ".apps.localhost"
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ SessionID, Text string }
		var raw map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		out.SessionID, _ = raw["session_id"].(string)
		out.Text, _ = raw["text"].(string)
		if resp.StatusCode != 200 {
			t.Fatalf("chat = %d %v", resp.StatusCode, raw)
		}
		return out.SessionID, out.Text
	}
	session, _ := chat(p, "", "before the restart")
	p.cancel()

	// The same data dir: everything is still there.
	q := startPlatformAt(t, dataDir)
	q.token = p.token
	var d struct {
		Status   string
		IsActive bool
	}
	if s := q.call(t, "GET", "/api/deployments/"+deployID, nil, nil, &d); s != 200 || d.Status != "ready" || !d.IsActive {
		t.Fatalf("deployment after restart = %d %+v", s, d)
	}
	id, text := chat(q, session, "after the restart")
	if id != session || text != "echo: after the restart" {
		t.Fatalf("chat after restart = %s %q, want session %s", id, text, session)
	}
	var h struct {
		Messages []struct{ Role, Content string }
	}
	var tok struct{ Token string }
	q.call(t, "POST", "/api/agents/"+agentID+"/tokens", map[string]any{}, nil, &tok)
	req, _ := http.NewRequest("GET", q.url+"/sessions/history/"+session, nil)
	req.Host = slug + ".apps.localhost"
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, m := range h.Messages {
		if m.Role == "user" {
			said = append(said, m.Content)
		}
	}
	if strings.Join(said, "|") != "before the restart|after the restart" {
		t.Fatalf("history after restart: %q", said)
	}
}
