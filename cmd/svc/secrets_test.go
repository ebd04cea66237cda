package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"svc/agent/agenttest"
)

// TestSecretsSupportDeskWithoutItsSecret is the first hour of a new user (issue #24): the
// support-desk example deployed before its secrets are set is ready and active; the deploy
// warns about every unset reference and says how to set it; its chat works, and only its store
// tools fail, saying which variable is missing and how to set it; `svc secrets set` then makes
// the store work at once, without a rebuild or a restart of the runtime.
func TestSecretsSupportDeskWithoutItsSecret(t *testing.T) {
	// The agent's references resolve from the environment of svc up after its secrets: empty
	// here, which counts as unset.
	for _, name := range []string{"SUPPORT_DB_URL", "STATUS_API_URL", "STATUS_API_TOKEN"} {
		t.Setenv(name, "")
	}
	p := startPlatform(t)
	a := newAgent(t, p, "support-desk", true)

	// 1. The deploy succeeds, and warns.
	res := runCLI(t, p, "", "deploy", "--agent", "support-desk", "--dir", agenttest.Dir(t, "support-desk"), "--wait")
	if res.err != nil {
		t.Fatalf("deploy = %v\nstdout: %s\nstderr: %s", res.err, res.stdout, res.stderr)
	}
	const dbWarning = "env:SUPPORT_DB_URL (svc.json stores.url) is not set: the store tools and store routes will fail until it is; " +
		"set it with `svc secrets set support-desk SUPPORT_DB_URL` or in the runner's environment"
	wantLines(t, "deploy stdout", res.stdout,
		"▸ verify\n    the stored bundle opens and loads as a runner loads it\n", "    warning: "+dbWarning+"\n",
		"is ready and active in production\n")
	wantLines(t, "deploy stderr", res.stderr,
		"3 warnings (the agent runs; only what uses an unset value fails until it is set):\n",
		"  warning: "+dbWarning+"\n",
		"  warning: env:STATUS_API_URL (svc/connections/status/spec.json baseUrl) is not set: connection status will fail until it is; set it with `svc secrets set support-desk STATUS_API_URL`",
		"  warning: env:STATUS_API_TOKEN (svc/connections/status/spec.json auth.headers.Authorization) is not set:",
	)

	// 2. The chat works; the store tool says what is missing; so do the store routes.
	res = runCLI(t, p, "", "chat", "support-desk", "-m", "Hello")
	if res.err != nil || res.stdout != "echo: Hello\n" {
		t.Fatalf("chat = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	const setTicket = `/tool store__tickets__set {"customer_id": "acme", "number": 7, "subject": "VPN down", "status": "open"}`
	res = runCLI(t, p, "", "chat", "support-desk", "-m", setTicket)
	const why = "← error: the stores database is unavailable: field \"stores.url\": env:SUPPORT_DB_URL is not set; " +
		"set it with `svc secrets set support-desk SUPPORT_DB_URL` or in the runner's environment\n"
	if res.err != nil || !strings.Contains(res.stdout, "→ store__tickets__set ") || !strings.Contains(res.stdout, why) {
		t.Fatalf("store tool without the secret: %v\nstdout: %s\nstderr: %s\nwant the line %q", res.err, res.stdout, res.stderr, why)
	}
	token := runtimeToken(t, p, a.AgentID)
	req, err := http.NewRequest("GET", p.url+"/stores/tickets/acme-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "support-desk.apps.localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("store route without the secret = %d, want 503", resp.StatusCode)
	}

	// 3. The secret, from standard input (kept out of the shell's history); the next use of
	// the store opens the database: no rebuild, no restart.
	dbPath := filepath.Join(t.TempDir(), "support.db")
	res = runCLI(t, p, dbPath+"\n", "secrets", "set", "support-desk", "SUPPORT_DB_URL")
	if res.err != nil || res.stdout != "secret SUPPORT_DB_URL of support-desk set; what uses env:SUPPORT_DB_URL sees it from its next use\n" {
		t.Fatalf("secrets set = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	res = runCLI(t, p, "", "chat", "support-desk", "-m", setTicket)
	if res.err != nil || !strings.Contains(res.stdout, `← {"key":"acme-7","version":1,"value":{`) || strings.Contains(res.stdout, "error") {
		t.Fatalf("store tool once the secret is set: %v\nstdout: %s\nstderr: %s", res.err, res.stdout, res.stderr)
	}
	var item struct {
		Key     string
		Version int
	}
	agentGet(t, p, "support-desk", "/stores/tickets/acme-7", token, &item)
	if item.Key != "acme-7" || item.Version != 1 {
		t.Errorf("the ticket = %+v, want acme-7 version 1 (in the database the secret names)", item)
	}

	res = runCLI(t, p, "", "secrets", "list", "support-desk")
	if res.err != nil || !strings.HasPrefix(res.stdout, "NAME") || !strings.Contains(res.stdout, "\nSUPPORT_DB_URL ") || strings.Contains(res.stdout, dbPath) {
		t.Errorf("secrets list = %q, %v; want the name and never the value", res.stdout, res.err)
	}
}

// TestSecretsCommands: set (from --value or standard input), list and unset, naming the agent
// by slug, by id or with --agent; what they refuse.
func TestSecretsCommands(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "vault", false)

	res := runCLI(t, p, "", "secrets", "list", "vault")
	if res.err != nil || res.stdout != "vault has no secrets\n" {
		t.Errorf("list of none = %q, %v", res.stdout, res.err)
	}
	for _, args := range [][]string{
		{"secrets", "set", "vault", "API_KEY", "--value", "from-flag"},
		{"secrets", "set", a.AgentID, "DB_URL"}, // standard input
		{"secrets", "set", "TOKEN", "--agent", "vault"},
	} {
		if res := runCLI(t, p, "from-stdin\r\n", args...); res.err != nil || !strings.HasPrefix(res.stdout, "secret ") {
			t.Fatalf("%v = %q, %v", args, res.stdout, res.err)
		}
	}
	res = runCLI(t, p, "", "secrets", "list", "--agent", a.AgentID)
	if lines := strings.Split(strings.TrimSpace(res.stdout), "\n"); res.err != nil || len(lines) != 4 ||
		!strings.HasPrefix(lines[1], "API_KEY ") || !strings.HasPrefix(lines[2], "DB_URL ") || !strings.Contains(lines[3], " ago (") {
		t.Errorf("list = %q, %v", res.stdout, res.err)
	}
	if res := runCLI(t, p, "", "secrets", "unset", "vault", "TOKEN"); res.err != nil || res.stdout != "secret TOKEN of vault removed\n" {
		t.Errorf("unset = %q, %v", res.stdout, res.err)
	}

	refusals := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"unset of a secret that is not set", "", []string{"secrets", "unset", "vault", "TOKEN"}, "vault has no secret TOKEN (`svc secrets list vault` shows its secrets)"},
		{"an empty value", "\n", []string{"secrets", "set", "vault", "EMPTY"}, "no value for EMPTY on standard input"},
		{"a bad name", "", []string{"secrets", "set", "vault", "bad-name", "--value", "x"}, "name: must match [A-Z_][A-Z0-9_]*"},
		{"an unknown agent", "", []string{"secrets", "list", "nope"}, `no agent has the id or slug "nope"`},
		{"no agent", "", []string{"secrets", "list"}, "no agent: pass --agent"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SVC_AGENT", "")
			res := runCLI(t, p, tt.stdin, tt.args...)
			if res.err == nil || !strings.Contains(res.err.Error(), tt.want) {
				t.Errorf("%v = %v, want an error saying %q", tt.args, res.err, tt.want)
			}
		})
	}
	// Secrets need an admin token.
	var tok struct{ Token string }
	if st := p.call(t, "POST", "/api/tokens", map[string]any{"name": "op", "kind": "operator"}, nil, &tok); st != http.StatusCreated {
		t.Fatalf("POST /api/tokens = %d", st)
	}
	res = runCLIWith(context.Background(), t, nil, strings.NewReader(""), nil, "secrets", "list", "vault", "--url", p.url, "--token", tok.Token)
	if res.err == nil || !strings.Contains(res.err.Error(), "secrets need an admin token") {
		t.Errorf("list with an operator token = %v", res.err)
	}
}

// TestReadSecret: a value piped in loses one trailing newline and nothing else.
func TestReadSecret(t *testing.T) {
	for in, want := range map[string]string{
		"v\n": "v", "v\r\n": "v", "v": "v", "v\n\n": "v\n", " spaced value \n": " spaced value ", "line1\nline2\n": "line1\nline2",
	} {
		got, err := readSecret(strings.NewReader(in), io.Discard, "X")
		if err != nil || got != want {
			t.Errorf("readSecret(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n", "\r\n"} {
		if _, err := readSecret(strings.NewReader(in), io.Discard, "X"); err == nil {
			t.Errorf("readSecret(%q) succeeded, want an error for an empty value", in)
		}
	}
}
