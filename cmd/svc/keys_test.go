package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAgentKeys: svc agents keys create|list|revoke, and svc chat --api-key against svc up (no
// platform token involved in the chat); the key is refused on the platform API (403) and, once
// revoked, by the runner, which polls revocations.
func TestAgentKeys(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")

	res := runCLI(t, p, "", "agents", "keys", "list", "hello")
	if res.err != nil || res.stdout != "hello has no API keys\n" {
		t.Errorf("list of none = %q, %v", res.stdout, res.err)
	}
	res = runCLI(t, p, "", "agents", "keys", "create", "hello", "backend")
	key := strings.TrimSpace(res.stdout)
	if res.err != nil || !strings.HasPrefix(key, "ak_") || !strings.Contains(res.stderr, "shown only this once") {
		t.Fatalf("create = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	res = runCLI(t, p, "", "agents", "keys", "list", "--agent", a.AgentID)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[1], " backend ") || strings.Contains(res.stdout, key) {
		t.Fatalf("list = %q, %v; want one key, never its value", res.stdout, res.err)
	}
	keyID := strings.Fields(lines[1])[0]

	// The key chats (no platform token: runCLIWith without a platform adds no --token).
	chat := func() cliResult {
		return runCLIWith(t.Context(), t, nil, strings.NewReader(""), nil, "chat", "hello", "--url", p.url, "--api-key", key, "-m", "hi")
	}
	if res := chat(); res.err != nil || res.stdout != "echo: hi\n" {
		t.Fatalf("chat --api-key = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	// It never calls the platform.
	req, _ := http.NewRequest("GET", p.url+"/api/agents", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("ak_ on GET /api/agents = %d, want 403", resp.StatusCode)
	}

	res = runCLI(t, p, "", "agents", "keys", "revoke", "hello", keyID)
	if res.err != nil || !strings.HasPrefix(res.stdout, "API key "+keyID+" of hello revoked") {
		t.Fatalf("revoke = %q, %v", res.stdout, res.err)
	}
	// The runner polls revocations every 2 s: wait for the refusal (a bound, not a measure).
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := chat()
		if res.err != nil && strings.Contains(res.err.Error(), "unknown or revoked API key") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key still chats: %q, %v", res.stdout, res.err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"revoke twice", []string{"agents", "keys", "revoke", "hello", keyID}, "hello has no API key " + keyID + ", or it is revoked already"},
		{"create without a name", []string{"agents", "keys", "create", "hello", " "}, "name: is required"},
		{"chat with a pk_ as key", []string{"chat", "hello", "--api-key", "pk_x", "-m", "hi"}, "--api-key (SVC_AGENT_API_KEY): want an agent API key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, p, "", tt.args...)
			if res.err == nil || !strings.Contains(res.err.Error(), tt.want) {
				t.Errorf("%v = %v, want an error saying %q", tt.args, res.err, tt.want)
			}
		})
	}
}
