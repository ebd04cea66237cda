package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"svc/client"
	"svc/client/clienttest"
)

// cliResult is what one run of a client command printed and returned.
type cliResult struct {
	stdout, stderr string
	err            error
}

// runCLI runs `svc ARGS... --url <fake> --token <fake token>` with stdin and captures its output.
func runCLI(t *testing.T, p *clienttest.Platform, stdin string, args ...string) cliResult {
	t.Helper()
	return runCLIWith(context.Background(), t, p, strings.NewReader(stdin), args...)
}

// runCLIWith is runCLI with a ctx and any stdin.
func runCLIWith(ctx context.Context, t *testing.T, p *clienttest.Platform, stdin io.Reader, args ...string) cliResult {
	t.Helper()
	root := &cobra.Command{Use: "svc", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(clientCommands()...)
	if p != nil {
		args = append(args, "--url", p.URL(), "--token", clienttest.Token)
	}
	root.SetArgs(args)
	var out, errOut bytes.Buffer
	root.SetIn(stdin)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(ctx)
	return cliResult{stdout: out.String(), stderr: errOut.String(), err: err}
}

// wantLines fails unless every want appears in got, in order.
func wantLines(t *testing.T, what, got string, want ...string) {
	t.Helper()
	rest := got
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("%s lacks %q (in order); it is:\n%s", what, w, got)
			return
		}
		rest = rest[i+len(w):]
	}
}

// agentDir writes a small agent source folder and returns it.
func agentDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"svc.json":  `{"name":"hello","version":"1.0.0"}`,
		"AGENT.md":  "Be brief.",
		".git/HEAD": "ref: refs/heads/main",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func isExit(err error) bool {
	var ee exitError
	return errors.As(err, &ee) && ee.code == 1
}

func TestDeploy(t *testing.T) {
	dir := agentDir(t)
	tests := []struct {
		name       string
		autoPromo  bool
		plan       *clienttest.Plan
		args       []string
		wantOut    []string
		wantErrOut []string
		wantErr    func(error) bool
	}{
		{
			name: "folder to staging, waiting",
			args: []string{"--dir", dir, "--env", "staging", "--wait"},
			wantOut: []string{
				"Uploaded " + dir + " as source version sv", "Deploying hello to staging: deployment d",
				"▸ start\n    build started\n▸ fetch\n    fetched the source\n▸ validate\n    source sha256:00: 3 files\n    agent hello 1.0.0: 0 tools\n▸ compile",
				"Build b", " succeeded (fetch 5 ms, validate 5 ms, compile 5 ms, pack 5 ms, upload 5 ms)",
				"is ready and active in staging", "(pinned)",
			},
		},
		{
			name:    "production without autoPromoteProduction is not activated",
			args:    []string{"--wait"},
			wantOut: []string{"Deploying hello to production", "is ready but not active in production (autoPromoteProduction is off).\nActivate it with: svc activate d"},
		},
		{
			name:      "production with autoPromoteProduction",
			autoPromo: true,
			args:      []string{"--wait", "--branch", "main"},
			wantOut:   []string{"is ready and active in production\n  http://hello.apps.localhost:"},
		},
		{
			name:    "waits while the deployment settles",
			plan:    &clienttest.Plan{Log: []string{"2026-01-02T03:04:05Z [fetch] ok", "no step here"}, PendingReads: 3},
			args:    []string{"--wait", "--env", "preview-x", "--poll-interval", "1ms"},
			wantOut: []string{"▸ fetch\n    ok\n    no step here\n", "is ready and active in preview-x"},
		},
		{
			name:    "without --wait the state is reported as it is",
			plan:    &clienttest.Plan{PendingReads: 1},
			args:    []string{"--env", "staging"},
			wantOut: []string{"is building; check it with `svc status`"},
		},
		{
			name:       "a failed build prints every problem and exits 1",
			plan:       &clienttest.Plan{Log: []string{"[validate] svc.json:3: unknown field \"x\""}, Error: "svc.json:3: unknown field \"x\"\ntools/t/tool.json: missing\n"},
			args:       []string{"--wait"},
			wantOut:    []string{"▸ validate\n    svc.json:3: unknown field \"x\"\n"},
			wantErrOut: []string{"Build b", " failed:\n  svc.json:3: unknown field \"x\"\n  tools/t/tool.json: missing\n"},
			wantErr:    isExit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := clienttest.New(t)
			p.AddAgent("hello", client.DeploySettings{AutoPromoteProduction: tt.autoPromo})
			if tt.plan != nil {
				plan := *tt.plan
				p.SetBuildPlan(func(client.RedeployRequest) clienttest.Plan { return plan })
			}
			res := runCLI(t, p, "", append([]string{"deploy", "--agent", "hello"}, tt.args...)...)
			if tt.wantErr == nil && res.err != nil {
				t.Fatalf("deploy = %v\nstderr: %s", res.err, res.stderr)
			}
			if tt.wantErr != nil && !tt.wantErr(res.err) {
				t.Fatalf("deploy = %v, want a different error", res.err)
			}
			wantLines(t, "stdout", res.stdout, tt.wantOut...)
			wantLines(t, "stderr", res.stderr, tt.wantErrOut...)
		})
	}
}

func TestDeployUploadsTheFolder(t *testing.T) {
	p := clienttest.New(t)
	a := p.AddAgent("hello", client.DeploySettings{})
	res := runCLI(t, p, "", "deploy", "--agent", "hello", "--dir", agentDir(t), "--env", "staging")
	if res.err != nil {
		t.Fatal(res.err)
	}
	deps := p.Deployments(a.AgentID)
	if len(deps) != 1 || deps[0].SourceVersionID == "" {
		t.Fatalf("deployments = %+v, want one built from the uploaded source version", deps)
	}
	want := map[string]string{"svc.json": `{"name":"hello","version":"1.0.0"}`, "AGENT.md": "Be brief."}
	if diff := cmp.Diff(want, p.Source(deps[0].SourceVersionID)); diff != "" {
		t.Errorf("uploaded files (-want +got):\n%s", diff)
	}

	// Reusing the build starts nothing new.
	res = runCLI(t, p, "", "deploy", "--agent", "hello", "--env", "staging", "--reuse-build")
	if res.err != nil || !strings.Contains(res.stdout, "Reusing deployment "+deps[0].DeployID) {
		t.Errorf("reuse: %v\n%s", res.err, res.stdout)
	}
	if n := len(p.Deployments(a.AgentID)); n != 1 {
		t.Errorf("%d deployments after a reuse, want 1", n)
	}
}

func TestDeployRefusals(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})
	empty := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		noPlatform bool
		wantErr    string
		wantErrOut string
	}{
		{name: "refused source", args: []string{"--agent", "hello", "--dir", empty},
			wantErrOut: "The source in " + empty + " was refused:\n  svc.json: missing\n"},
		{name: "missing folder", args: []string{"--agent", "hello", "--dir", filepath.Join(empty, "nope")}, wantErr: "no such file"},
		{name: "unknown agent", args: []string{"--agent", "nope"}, wantErr: `no agent has the id or slug "nope"`},
		{name: "no agent", args: []string{"--agent", ""}, wantErr: "no agent: pass --agent"},
		{name: "redeploy refused", args: []string{"--agent", "hello", "--env", "refused"}, wantErr: "CONFLICT: a build is running"},
		{name: "no token", args: []string{"--agent", "hello", "--url", "http://127.0.0.1:1", "--token", " "}, noPlatform: true,
			wantErr: "no platform token: set SVC_TOKEN or pass --token"},
		{name: "bad URL", args: []string{"--agent", "hello", "--url", "127.0.0.1:8080", "--token", "pk_x"}, noPlatform: true,
			wantErr: `setting SVC_URL (--url) = "127.0.0.1:8080"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "redeploy refused" {
				p.Refuse("POST", "/api/deployments/redeploy", &client.Error{Status: 409, Code: client.CodeConflict, Message: "a build is running"})
			}
			platform := p
			if tt.noPlatform {
				platform = nil
			}
			res := runCLI(t, platform, "", append([]string{"deploy"}, tt.args...)...)
			if res.err == nil {
				t.Fatalf("deploy succeeded:\n%s", res.stdout)
			}
			if tt.wantErr != "" && !strings.Contains(res.err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want it to contain %q", res.err, tt.wantErr)
			}
			if tt.wantErrOut != "" && (!isExit(res.err) || !strings.Contains(res.stderr, tt.wantErrOut)) {
				t.Errorf("error %v, stderr %q; want exit 1 and %q", res.err, res.stderr, tt.wantErrOut)
			}
		})
	}
}

func TestSettingsFromEnvironment(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})
	t.Setenv("SVC_URL", p.URL())
	t.Setenv("SVC_TOKEN", clienttest.Token)
	t.Setenv("SVC_AGENT", "hello")
	res := runCLI(t, nil, "", "token")
	if res.err != nil || !regexp.MustCompile(`^rt_\d+\n$`).MatchString(res.stdout) {
		t.Errorf("token from env settings = %q, %v", res.stdout, res.err)
	}
}

func TestLogs(t *testing.T) {
	p := clienttest.New(t)
	a := p.AddAgent("hello", client.DeploySettings{})
	rd, err := client.New(p.URL(), clienttest.Token, nil).Redeploy(context.Background(), client.RedeployRequest{AgentID: a.AgentID})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(clienttest.DefaultPlan().Log, "\n") + "\n"
	for _, args := range [][]string{{"logs", rd.BuildID}, {"logs", rd.BuildID, "-f"}, {"logs", "--follow", rd.BuildID}} {
		res := runCLI(t, p, "", args...)
		if res.err != nil || res.stdout != want {
			t.Errorf("%v = %q, %v; want %q", args, res.stdout, res.err, want)
		}
	}
	if res := runCLI(t, p, "", "logs", "b-nope"); res.err == nil || !strings.Contains(res.err.Error(), "NOT_FOUND") {
		t.Errorf("logs of a missing build = %v", res.err)
	}
	if res := runCLI(t, p, "", "logs"); res.err == nil {
		t.Error("logs without a build id succeeded")
	}
}

func TestStatus(t *testing.T) {
	p := clienttest.New(t)
	a := p.AddAgent("hello", client.DeploySettings{})
	now := time.Now()
	ready := func(id, env, commit string, active bool, ago time.Duration) client.Deployment {
		at := now.Add(-ago)
		return client.Deployment{DeployID: id, BuildID: "b" + id, AgentID: a.AgentID, Environment: env, Commit: commit,
			Status: client.StatusReady, IsActive: active, CreatedAt: at, ReadyAt: &at, ActivatedAt: &at}
	}
	p.AddDeployment(ready("d1", "production", "0123456789abcdef0123456789abcdef01234567", true, 150*time.Minute))
	p.AddDeployment(ready("d2", "staging", "", true, 45*time.Second))
	p.AddDeployment(client.Deployment{DeployID: "d3", AgentID: a.AgentID, Environment: "production", Status: client.StatusFailed, CreatedAt: now.Add(-5 * time.Minute)})
	p.AddDeployment(client.Deployment{DeployID: "d4", AgentID: a.AgentID, Environment: "preview-x", Status: client.StatusBuilding, CreatedAt: now.Add(-72 * time.Hour)})
	res := runCLI(t, p, "", "status", "--agent", "hello")
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := "Agent hello (ag_hello)\n" +
		"URL   " + a.URL + "\n" +
		"\n" +
		"ENVIRONMENT  ACTIVE  COMMIT   STATUS  AGE  NEWEST\n" +
		"production   d1      0123456  ready   2h   d3 (failed, 5m)\n" +
		"preview-x    -       -        -       -    d4 (building, 3d)\n" +
		"staging      d2      -        ready   45s  -\n"
	if diff := cmp.Diff(want, res.stdout); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}

	empty := p.AddAgent("empty", client.DeploySettings{})
	res = runCLI(t, p, "", "status", "--agent", empty.AgentID)
	if res.err != nil || !strings.Contains(res.stdout, "No deployments yet") {
		t.Errorf("status of an agent without deployments = %q, %v", res.stdout, res.err)
	}
}

func TestActivatePromoteRollback(t *testing.T) {
	p := clienttest.New(t)
	a := p.AddAgent("hello", client.DeploySettings{})
	c := client.New(p.URL(), clienttest.Token, nil)
	ctx := context.Background()
	deploy := func(env string) client.Deployment {
		rd, err := c.Redeploy(ctx, client.RedeployRequest{AgentID: a.AgentID, Environment: env})
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Deployment(ctx, rd.DeployID) // the fake builds on first look
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := deploy("production")
	res := runCLI(t, p, "", "activate", first.DeployID)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantLines(t, "activate", res.stdout, "Deployment "+first.DeployID+" is now active in production\n", "  build        "+first.BuildID,
		"  from         0123456", "  status       ready, active")

	deploy("staging")
	res = runCLI(t, p, "", "promote", "--agent", "hello", "--from", "staging")
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantLines(t, "promote", res.stdout, "Promoted staging to production: deployment d", " is now active", "environment  production")
	active, err := c.ActiveDeployment(ctx, a.AgentID, "")
	if err != nil || active.DeployID == first.DeployID {
		t.Fatalf("active after promote = %+v, %v", active, err)
	}

	res = runCLI(t, p, "", "rollback", "--agent", "hello")
	if res.err != nil || !strings.Contains(res.stdout, "Rolled back production: deployment "+first.DeployID+" is now active") {
		t.Fatalf("rollback = %q, %v", res.stdout, res.err)
	}
	res = runCLI(t, p, "", "rollback", "--agent", "hello", active.DeployID)
	if res.err != nil || !strings.Contains(res.stdout, "deployment "+active.DeployID+" is now active") {
		t.Fatalf("rollback to an id = %q, %v", res.stdout, res.err)
	}

	refusals := []struct {
		name    string
		method  string
		path    string
		code    string
		args    []string
		wantErr string
	}{
		{"eval gate", "POST", "/api/deployments/promote", client.CodeEvalGateBlocked, []string{"promote", "--agent", "hello", "--from", "staging"},
			"promotion blocked: the svc/evals status of the source commit is pending or failing (refused); fix the evals or pass --force"},
		{"bundle", "POST", "/api/deployments/promote", client.CodeBundleUnavailable, []string{"promote", "--agent", "hello", "--from", "staging"},
			"refused: refused"},
		{"nothing to roll back", "POST", "/api/deployments/rollback", client.CodeNothingToRollBack, []string{"rollback", "--agent", "hello", "--env", "staging"},
			"nothing to roll back to: no earlier deployment of the environment completed and was live (refused); the active deployment is unchanged"},
		{"not ready", "POST", "/api/deployments/d9/activate", client.CodeBuildNotReady, []string{"activate", "d9"},
			"the deployment is not ready: its build has not succeeded (refused); follow it with `svc logs BUILD_ID -f`"},
		{"forbidden", "POST", "/api/deployments/d9/activate", client.CodeForbidden, []string{"activate", "d9"},
			"the token may not do this (refused): use an operator token bound to this agent, or an unbound one"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			status := 422
			if tt.code == client.CodeForbidden {
				status = 403
			}
			p.Refuse(tt.method, tt.path, &client.Error{Status: status, Code: tt.code, Message: "refused"})
			res := runCLI(t, p, "", tt.args...)
			if res.err == nil || res.err.Error() != tt.wantErr {
				t.Errorf("error = %v, want %q", res.err, tt.wantErr)
			}
		})
	}
	// The real fake refusals, not injected ones.
	if res := runCLI(t, p, "", "rollback", "--agent", "hello", "--env", "nowhere"); res.err == nil || !strings.Contains(res.err.Error(), "nothing to roll back") {
		t.Errorf("rollback of an empty environment = %v", res.err)
	}
	if res := runCLI(t, p, "", "promote", "--agent", "hello"); res.err == nil || !strings.Contains(res.err.Error(), "--from") {
		t.Errorf("promote without --from = %v", res.err)
	}
	res = runCLI(t, nil, "", "promote", "--agent", "hello", "--from", "staging", "--force", "--url", p.URL(), "--token", "pk_bad")
	if res.err == nil || !strings.Contains(res.err.Error(), "the platform refused the token (missing or unknown token): check SVC_TOKEN or --token") {
		t.Errorf("promote with a bad token = %v", res.err)
	}
}

func TestToken(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})
	tests := []struct {
		ttl string
		ok  bool
	}{
		{"59s", false}, {"1m", true}, {"24h", true}, {"24h0m1s", false}, {"90.5s", false},
	}
	for _, tt := range tests {
		res := runCLI(t, p, "", "token", "--agent", "hello", "--ttl", tt.ttl, "--scope-id", "org-1")
		if tt.ok != (res.err == nil) {
			t.Errorf("--ttl %s: error %v, want ok=%v", tt.ttl, res.err, tt.ok)
		}
		if tt.ok && !regexp.MustCompile(`^rt_\d+\n$`).MatchString(res.stdout) {
			t.Errorf("--ttl %s printed %q, want only the token", tt.ttl, res.stdout)
		}
		if !tt.ok && (res.err == nil || !strings.Contains(res.err.Error(), "--ttl")) {
			t.Errorf("--ttl %s: error %v, want one naming --ttl", tt.ttl, res.err)
		}
	}
}

func TestChat(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})

	res := runCLI(t, p, "", "chat", "hello", "--message", "hi", "--context", "plan=pro", "--named-agent", "support")
	if res.err != nil || res.stdout != "echo: hi\n" {
		t.Fatalf("one-shot chat = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	reqs := p.ChatRequests()
	if len(reqs) != 1 || reqs[0].Context["plan"] != "pro" || reqs[0].Agent != "support" || reqs[0].SessionID != "" {
		t.Errorf("request = %+v", reqs)
	}

	// Interactive: the session continues between messages, /new starts another, /exit leaves.
	res = runCLI(t, p, "one\n\n  two  \n/new\nthree\n/exit\nnever\n", "chat", "--agent", "hello")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if want := "echo: one\necho: two\necho: three\n"; res.stdout != want {
		t.Errorf("interactive output = %q, want %q", res.stdout, want)
	}
	var sessions []string
	for _, r := range p.ChatRequests()[1:] {
		sessions = append(sessions, r.Message+"@"+r.SessionID)
	}
	if diff := cmp.Diff([]string{"one@", "two@s2", "three@"}, sessions); diff != "" {
		t.Errorf("messages@sessions (-want +got):\n%s", diff)
	}

	// --deployment talks to the pinned URL; --session continues a session.
	res = runCLI(t, p, "", "chat", "hello", "--deployment", "d123", "--session", "s-old", "-m", "pinned")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if last := p.ChatRequests(); last[len(last)-1].SessionID != "s-old" {
		t.Errorf("session = %q, want s-old", last[len(last)-1].SessionID)
	}
}

func TestChatFrames(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})
	frame := clienttest.Frame
	p.SetChat(func(req client.ChatRequest, write func(string)) {
		write(frame(map[string]any{"type": "init", "session_id": "s1"}))
		write(frame(map[string]any{"type": "warning", "message": "no model configured: using echo"}))
		write(frame(map[string]any{"type": "text_delta", "content": "Let me "}))
		write(frame(map[string]any{"type": "text_delta", "content": "look."}))
		write(frame(map[string]any{"type": "tool_call_start", "tool_name": "lookup", "tool_id": "t1", "parameters": map[string]any{"q": "x", "a": 1}}))
		write(": keep-alive\n\n")
		write(frame(map[string]any{"type": "tool_call_result", "tool_id": "t1", "status": "success", "result": map[string]any{"found": true}}))
		write(frame(map[string]any{"type": "tool_call_start", "tool_name": "fail", "tool_id": "t2", "parameters": map[string]any{}}))
		write(frame(map[string]any{"type": "tool_call_result", "tool_id": "t2", "status": "error", "error": "boom"}))
		write(frame(map[string]any{"type": "tool_call_result", "tool_id": "t3", "status": "success", "content": strings.Repeat("é", 400)}))
		write(frame(map[string]any{"type": "thinking_delta", "content": "hidden"}))
		write(frame(map[string]any{"type": "text_delta", "content": "Found it."}))
		if req.Message == "fail" {
			write(frame(map[string]any{"type": "error", "message": "provider down"}))
			write(frame(map[string]any{"type": "done", "reason": "error", "turns": 1}))
			return
		}
		write(frame(map[string]any{"type": "done", "reason": "max_turns", "turns": 50}))
	})
	res := runCLI(t, p, "", "chat", "hello", "-m", "go")
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := "Let me look.\n" +
		"→ lookup {\"a\":1,\"q\":\"x\"}\n" +
		"← {\"found\":true}\n" +
		"→ fail {}\n" +
		"← error: boom\n" +
		"← " + strings.Repeat("é", 300) + "…\n" +
		"Found it.\n"
	if diff := cmp.Diff(want, res.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if want := "warning: no model configured: using echo\n(turn ended: max_turns)\n"; res.stderr != want {
		t.Errorf("stderr = %q, want %q", res.stderr, want)
	}

	res = runCLI(t, p, "", "chat", "hello", "-m", "fail")
	if !isExit(res.err) || !strings.Contains(res.stderr, "error: provider down\n") {
		t.Errorf("one-shot with an error frame = %v, stderr %q; want exit 1", res.err, res.stderr)
	}
	// Interactive mode reports the error and goes on.
	res = runCLI(t, p, "fail\ngo\n", "chat", "hello")
	if res.err != nil || strings.Count(res.stdout, "Found it.") != 2 {
		t.Errorf("interactive with an error frame = %v, stdout %q", res.err, res.stdout)
	}
}

func TestChatRenewsAnExpiredToken(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})
	p.SetChat(func(req client.ChatRequest, write func(string)) {
		write(clienttest.Frame(map[string]any{"type": "init", "session_id": "s1"}))
		write(clienttest.Frame(map[string]any{"type": "text_delta", "content": "ok " + req.Message}))
		write(clienttest.Frame(map[string]any{"type": "done", "reason": "model_stop"}))
		p.RevokeRuntimeTokens() // every token expires after one turn
	})
	res := runCLI(t, p, "a\nb\nc\n", "chat", "hello")
	if res.err != nil || res.stdout != "ok a\nok b\nok c\n" {
		t.Errorf("chat across expiries = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
}

func TestChatInterrupted(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	p.SetChat(func(req client.ChatRequest, write func(string)) {
		write(clienttest.Frame(map[string]any{"type": "init", "session_id": "s1"}))
		write(clienttest.Frame(map[string]any{"type": "done", "reason": "model_stop"}))
		cancel(errors.New("ctrl-c")) // the user presses Ctrl-C once the turn is over
	})
	// stdin stays open after the first line, as a terminal does.
	pr, pw := io.Pipe()
	defer pw.Close() //nolint:errcheck // ends the command's stdin reader
	res := runCLIWith(ctx, t, p, io.MultiReader(strings.NewReader("hi\n"), pr), "chat", "hello")
	if res.err != nil {
		t.Errorf("interrupted chat = %v, want a quiet exit", res.err)
	}
}

func TestChatRefusals(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no agent", []string{"chat", "-m", "x", "--agent", ""}, "no agent"},
		{"bad context", []string{"chat", "hello", "--context", "novalue"}, `--context "novalue": want KEY=VALUE`},
		{"bad apps domain", []string{"chat", "hello", "--apps-domain", "a/b"}, "setting SVC_APPS_DOMAIN"},
		{"unknown agent", []string{"chat", "ghost", "-m", "x"}, `no agent has the id or slug "ghost"`},
		{"unknown deployment agent", []string{"chat", "hello", "--apps-domain", "other.localhost", "-m", "x"}, "chat with hello.other.localhost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, p, "", tt.args...)
			if res.err == nil || !strings.Contains(res.err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want it to contain %q", res.err, tt.wantErr)
			}
		})
	}
}

func TestAgentURL(t *testing.T) {
	tests := []struct {
		platform, slug, deploy, domain, want string
	}{
		{"http://127.0.0.1:8080", "hello", "", "apps.localhost", "http://hello.apps.localhost:8080"},
		{"https://svc.example.com", "hello", "", ".Apps.Example.com.", "https://hello.apps.example.com"},
		{"http://127.0.0.1:8080/", "hello", "D12", "apps.localhost", "http://d12--hello.apps.localhost:8080"},
	}
	for _, tt := range tests {
		got, err := agentURL(tt.platform, tt.slug, tt.deploy, tt.domain)
		if err != nil || got != tt.want {
			t.Errorf("agentURL(%q, %q, %q, %q) = %q, %v; want %q", tt.platform, tt.slug, tt.deploy, tt.domain, got, err, tt.want)
		}
	}
	if _, err := agentURL("http://x", "", "", "apps.localhost"); err == nil {
		t.Error("agentURL without a slug succeeded")
	}
}

func TestStepWriter(t *testing.T) {
	var out bytes.Buffer
	w := &stepWriter{w: &out}
	for _, chunk := range []string{"[fe", "tch] a\n[fetch] b\r\n", "[ not a step\n[]x\n2026-01-02T03:04:05.123Z [pack] c\n", "tail"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "▸ fetch\n    a\n    b\n    [ not a step\n    []x\n▸ pack\n    c\n    tail\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestChatExitThroughAPipe: /exit leaves at once, with standard input still open (a terminal
// that has not been closed), instead of waiting for another line.
func TestChatExitThroughAPipe(t *testing.T) {
	p := clienttest.New(t)
	p.AddAgent("hello", client.DeploySettings{})
	in, typed := io.Pipe()
	defer typed.Close()
	go func() {
		_, _ = io.WriteString(typed, "one\n/exit\n") // and nothing more: the writer stays open
	}()
	done := make(chan cliResult, 1)
	go func() { done <- runCLIWith(context.Background(), t, p, in, "chat", "--agent", "hello") }()
	select {
	case res := <-done:
		if res.err != nil || res.stdout != "echo: one\n" {
			t.Errorf("chat = %q, %v", res.stdout, res.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("svc chat did not leave on /exit while its input stayed open")
	}
}
