package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"svc/agent/agenttest"
	"svc/builder/gittest"
	"svc/bundle"
	"svc/client"
)

// The client commands are tested against the real platform: svc up running in the test
// (startPlatform), reached through its listener like any client reaches it.

// cliResult is what one run of a client command printed and returned.
type cliResult struct {
	stdout, stderr string
	err            error
}

// runCLI runs `svc ARGS... --url <platform> --token <its admin token>` with stdin and captures
// its output; with a nil platform it adds no flags.
func runCLI(t *testing.T, p *benchPlatform, stdin string, args ...string) cliResult {
	t.Helper()
	return runCLIWith(context.Background(), t, p, strings.NewReader(stdin), nil, args...)
}

// runCLIWith is runCLI with a ctx, any stdin, and tee (when not nil) getting stdout as it is
// written.
func runCLIWith(ctx context.Context, t *testing.T, p *benchPlatform, stdin io.Reader, tee io.Writer, args ...string) cliResult {
	t.Helper()
	root := &cobra.Command{Use: "svc", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(clientCommands()...)
	if p != nil {
		args = append(args, "--url", p.url, "--token", p.token)
	}
	root.SetArgs(args)
	var out, errOut bytes.Buffer
	root.SetIn(stdin)
	if tee != nil {
		root.SetOut(io.MultiWriter(&out, tee))
	} else {
		root.SetOut(&out)
	}
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

// writeTree writes files (slash paths to text) into a new folder and returns it.
func writeTree(t *testing.T, files map[string]string) string { return agenttest.Write(t, files) }

// agentFiles are the files of a small agent source folder; agentDir writes them with a .git
// folder beside them, which an upload leaves out.
func agentFiles() map[string]string {
	return map[string]string{"svc.json": `{"name":"hello","version":"1.0.0"}`, "AGENT.md": "Be brief."}
}

func agentDir(t *testing.T) string {
	t.Helper()
	files := agentFiles()
	files[".git/HEAD"] = "ref: refs/heads/main"
	return writeTree(t, files)
}

// echoWarning is the warning of the first turn of a session on the echo model.
const echoWarning = "warning: No model is configured (svc.json models.main or SVC_DEFAULT_MODEL), so this session uses the echo model, which repeats your message.\n"

// chatAgentDir writes an agent for chats on the echo model: a default agent that may read the
// knowledge document "big" (400 characters), and a named agent "support" whose prompt shows the
// chat's context.
func chatAgentDir(t *testing.T) string {
	t.Helper()
	return writeTree(t, map[string]string{
		"svc.json":                  `{"name":"hello","version":"1.0.0"}`,
		"agents/default/AGENT.md":   "Be brief.",
		"agents/default/agent.json": `{"name":"default","tools":["load_knowledge"]}`,
		"agents/support/AGENT.md":   "You help customers on the {{context.plan}} plan.",
		"svc/knowledge/big.md":      "---\ndescription: A long document.\n---\n" + strings.Repeat("é", 400),
	})
}

func isExit(err error) bool {
	var ee exitError
	return errors.As(err, &ee) && ee.code == 1
}

// admin is a client of the platform with its admin token.
func admin(p *benchPlatform) *client.Client { return client.New(p.url, p.token, nil) }

// newAgent creates an agent named slug, with autoPromoteProduction when autoPromote is set.
func newAgent(t testing.TB, p *benchPlatform, slug string, autoPromote bool) client.Agent {
	t.Helper()
	ctx := context.Background()
	a, err := admin(p).CreateAgent(ctx, slug, "")
	if err != nil {
		t.Fatal(err)
	}
	if autoPromote {
		if _, err := admin(p).PutSettings(ctx, a.AgentID, client.SettingsPatch{AutoPromoteProduction: &autoPromote}); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// newGitAgent creates an agent named slug whose source is a new git repository holding the
// fixture tree (agent/agenttest), and returns it with the repository and its first commit.
func newGitAgent(t *testing.T, p *benchPlatform, slug, fixture string) (client.Agent, *gittest.Repo, string) {
	t.Helper()
	dir := t.TempDir()
	repo, commit := gittest.Init(t, dir, agenttest.Dir(t, fixture))
	a := newAgent(t, p, slug, false)
	if err := admin(p).PutSource(context.Background(), a.AgentID, client.SourceRequest{Type: "git", URL: "file://" + dir}); err != nil {
		t.Fatal(err)
	}
	return a, repo, commit
}

// deployDir uploads dir as the agent's newest source version and deploys it to env (see redeploy).
func deployDir(t testing.TB, p *benchPlatform, agentID, dir, env string) client.Deployment {
	t.Helper()
	if _, err := admin(p).UploadDir(context.Background(), agentID, dir); err != nil {
		t.Fatal(err)
	}
	return redeploy(t, p, client.RedeployRequest{AgentID: agentID, Environment: env})
}

// redeploy starts a build and returns its deployment once it has settled (ready or failed).
func redeploy(t testing.TB, p *benchPlatform, req client.RedeployRequest) client.Deployment {
	t.Helper()
	ctx := context.Background()
	rd, err := admin(p).Redeploy(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		d, err := admin(p).Deployment(ctx, rd.DeployID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Settled() {
			return d
		}
	}
	t.Fatalf("deployment %s never settled", rd.DeployID)
	return client.Deployment{}
}

// runtimeToken mints a runtime token for the agent.
func runtimeToken(t *testing.T, p *benchPlatform, agentID string) string {
	t.Helper()
	tok, err := admin(p).MintRuntimeToken(context.Background(), agentID, client.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// agentGet gets path on the agent host <label>.apps.localhost with a runtime token and decodes the
// JSON answer into out.
func agentGet(t *testing.T, p *benchPlatform, label, path, token string, out any) {
	t.Helper()
	req, err := http.NewRequest("GET", p.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = label + ".apps.localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s on %s = %d", path, label, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// chatSessions lists the agent's sessions as "<named agent>: <user messages>", sorted.
func chatSessions(t *testing.T, p *benchPlatform, slug, token string) []string {
	t.Helper()
	var list struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
		}
	}
	agentGet(t, p, slug, "/sessions/history", token, &list)
	var out []string
	for _, s := range list.Sessions {
		var h struct {
			Agent    string
			Messages []struct{ Role, Content string }
		}
		agentGet(t, p, slug, "/sessions/history/"+s.SessionID, token, &h)
		var msgs []string
		for _, m := range h.Messages {
			if m.Role == "user" {
				msgs = append(msgs, m.Content)
			}
		}
		out = append(out, h.Agent+": "+strings.Join(msgs, ", "))
	}
	sort.Strings(out)
	return out
}

// treeDigest is the platform's digest of a source tree of files: what an upload of exactly
// those files answers.
func treeDigest(t *testing.T, files map[string]string) string {
	t.Helper()
	tree, err := bundle.FromFiles(files, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	digest, err := bundle.Digest(tree)
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

// timestamp is an RFC 3339 time as build log lines start with; the CLI does not show them.
var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d`)

func TestDeploy(t *testing.T) {
	p := startPlatform(t)
	dir := agentDir(t)
	tests := []struct {
		name       string
		slug       string
		autoPromo  bool
		git        string // fixture of the agent's git source; "" uploads --dir
		args       []string
		wantOut    []string
		wantErrOut []string
		wantErr    func(error) bool
	}{
		{
			name: "folder to staging, waiting",
			slug: "staged",
			args: []string{"--dir", dir, "--env", "staging", "--wait"},
			wantOut: []string{
				"Uploaded " + dir + " as source version v", "Deploying staged to staging: deployment d",
				"▸ start\n    build b", "▸ fetch\n    fetched source version v", "▸ validate\n    source sha256:",
				"\n    agent hello 1.0.0: 0 tools", "▸ compile\n", "▸ pack\n", "▸ upload\n", "▸ verify\n",
				"▸ done\n    deployment d", " ready and active in staging\n",
				"Build b", " succeeded (fetch ", " ms, validate ", " ms, compile ", " ms, pack ", " ms, upload ", " ms, verify ", " ms)\n",
				"is ready and active in staging\n  http://d", "--staged.apps.localhost:", " (pinned)\n",
			},
		},
		{
			name:    "production without autoPromoteProduction is not activated",
			slug:    "held",
			args:    []string{"--dir", dir, "--wait"},
			wantOut: []string{"Deploying held to production", "is ready but not active in production (autoPromoteProduction is off, or a newer deployment was requested; the build log says which).\nActivate it with: svc activate d"},
		},
		{
			name:      "production with autoPromoteProduction",
			slug:      "promoted",
			autoPromo: true,
			args:      []string{"--dir", dir, "--wait"},
			wantOut:   []string{"is ready and active in production\n  http://promoted.apps.localhost:"},
		},
		{
			// The build ends with its deployment settled, so the state is the same as with --wait.
			name:    "without --wait the state is reported as it is",
			slug:    "nowait",
			args:    []string{"--dir", dir, "--env", "preview-x"},
			wantOut: []string{"Deploying nowait to preview-x", "is ready and active in preview-x\n"},
		},
		{
			name: "a failed build prints every problem and exits 1",
			slug: "broken",
			git:  "broken",
			args: []string{"--wait", "--branch", "main"},
			wantOut: []string{"Deploying broken to production", "▸ fetch\n    fetched commit ",
				"▸ validate\n", "    svc.json: missing required field \"version\"\n"},
			wantErrOut: []string{"Build b", " failed:\n", "  svc.json: missing required field \"version\"\n", "  svc.json:1: unknown field \"colour\"\n",
				"  svc/tools/bad/handler.ts:2: TypeScript does not compile"},
			wantErr: isExit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.git != "" {
				newGitAgent(t, p, tt.slug, tt.git)
			} else {
				newAgent(t, p, tt.slug, tt.autoPromo)
			}
			res := runCLI(t, p, "", append([]string{"deploy", "--agent", tt.slug}, tt.args...)...)
			if tt.wantErr == nil && res.err != nil {
				t.Fatalf("deploy = %v\nstderr: %s", res.err, res.stderr)
			}
			if tt.wantErr != nil && !tt.wantErr(res.err) {
				t.Fatalf("deploy = %v, want a different error", res.err)
			}
			wantLines(t, "stdout", res.stdout, tt.wantOut...)
			wantLines(t, "stderr", res.stderr, tt.wantErrOut...)
			if timestamp.MatchString(res.stdout) {
				t.Errorf("stdout shows the log lines' times:\n%s", res.stdout)
			}
		})
	}
}

func TestDeployUploadsTheFolder(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", false)
	dir := agentDir(t)
	res := runCLI(t, p, "", "deploy", "--agent", "hello", "--dir", dir, "--env", "staging")
	if res.err != nil {
		t.Fatal(res.err)
	}
	deps, err := admin(p).ListDeployments(context.Background(), a.AgentID, "")
	if err != nil || len(deps) != 1 || deps[0].SourceVersionID == "" {
		t.Fatalf("deployments = %+v, %v; want one built from the uploaded source version", deps, err)
	}
	// The platform's digest is that of the tree it stored: the folder's files without .git.
	want := "Uploaded " + dir + " as source version " + deps[0].SourceVersionID + " (" + treeDigest(t, agentFiles()) + ")\n"
	if !strings.HasPrefix(res.stdout, want) {
		t.Errorf("stdout starts %q, want %q", res.stdout, want)
	}

	// Reusing the build starts nothing new.
	res = runCLI(t, p, "", "deploy", "--agent", "hello", "--env", "staging", "--reuse-build")
	if res.err != nil || !strings.Contains(res.stdout, "Reusing deployment "+deps[0].DeployID) {
		t.Errorf("reuse: %v\n%s", res.err, res.stdout)
	}
	if deps, err := admin(p).ListDeployments(context.Background(), a.AgentID, ""); err != nil || len(deps) != 1 {
		t.Errorf("%d deployments after a reuse (%v), want 1", len(deps), err)
	}
}

func TestDeployRefusals(t *testing.T) {
	p := startPlatform(t)
	newAgent(t, p, "hello", false) // no source yet
	empty := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		noPlatform bool
		wantErr    string
		wantErrOut string
	}{
		{name: "refused source", args: []string{"--agent", "hello", "--dir", empty},
			wantErrOut: "The source in " + empty + " was refused:\n  svc.json: missing svc.json"},
		{name: "missing folder", args: []string{"--agent", "hello", "--dir", filepath.Join(empty, "nope")}, wantErr: "no such file"},
		{name: "unknown agent", args: []string{"--agent", "nope"}, wantErr: `no agent has the id or slug "nope"`},
		{name: "no agent", args: []string{"--agent", ""}, wantErr: "no agent: pass --agent"},
		{name: "redeploy refused", args: []string{"--agent", "hello"}, wantErr: "INVALID_REQUEST: the agent has no source to build"},
		{name: "no token", args: []string{"--agent", "hello", "--url", "http://127.0.0.1:1", "--token", " "}, noPlatform: true,
			wantErr: "no platform token: set SVC_TOKEN or pass --token"},
		{name: "bad URL", args: []string{"--agent", "hello", "--url", "127.0.0.1:8080", "--token", "pk_x"}, noPlatform: true,
			wantErr: `setting SVC_URL (--url) = "127.0.0.1:8080"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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

// jwt matches a runtime token alone on its line.
var jwt = regexp.MustCompile(`^[\w-]+\.[\w-]+\.[\w-]+\n$`)

func TestSettingsFromEnvironment(t *testing.T) {
	p := startPlatform(t)
	newAgent(t, p, "hello", false)
	t.Setenv("SVC_URL", p.url)
	t.Setenv("SVC_TOKEN", p.token)
	t.Setenv("SVC_AGENT", "hello")
	res := runCLI(t, nil, "", "token")
	if res.err != nil || !jwt.MatchString(res.stdout) {
		t.Errorf("token from env settings = %q, %v", res.stdout, res.err)
	}
}

func TestLogs(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", false)
	d := deployDir(t, p, a.AgentID, agentDir(t), "staging")
	var log strings.Builder
	if err := admin(p).Logs(context.Background(), d.BuildID, &log); err != nil {
		t.Fatal(err)
	}
	want := log.String()
	if !strings.HasSuffix(want, "[done] deployment "+d.DeployID+" ready and active in staging\n") {
		t.Fatalf("log of build %s:\n%s", d.BuildID, want)
	}
	for _, args := range [][]string{{"logs", d.BuildID}, {"logs", d.BuildID, "-f"}, {"logs", "--follow", d.BuildID}} {
		res := runCLI(t, p, "", args...)
		if res.err != nil || res.stdout != want {
			t.Errorf("%v = %q, %v; want %q", args, res.stdout, res.err, want)
		}
	}
	if res := runCLI(t, p, "", "logs", "b-nope"); res.err == nil || !strings.Contains(res.err.Error(), "NOT_FOUND") {
		t.Errorf("logs of a missing build = %v", res.err)
	}
	// Without a build id: where build ids come from, not cobra's "accepts 1 arg(s)".
	if res := runCLI(t, p, "", "logs"); res.err == nil || !strings.Contains(res.err.Error(), "needs one BUILD_ID") || !strings.Contains(res.err.Error(), "`svc deploy` prints") {
		t.Errorf("logs without a build id = %v, want where build ids come from", res.err)
	}
}

// TestCLIConnectionRefused: a client command with nothing listening at the platform URL asks
// whether svc up runs and names SVC_URL and --url.
func TestCLIConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil { // nothing listens there now
		t.Fatal(err)
	}
	res := runCLI(t, nil, "", "status", "--agent", "hello", "--url", url, "--token", "pk_x")
	if res.err == nil {
		t.Fatal("status with nothing listening succeeded")
	}
	for _, want := range []string{"no platform answers at " + url, "connection refused", "is `svc up` running?", "SVC_URL", "--url"} {
		if !strings.Contains(res.err.Error(), want) {
			t.Errorf("status with nothing listening = %v, want %q in it", res.err, want)
		}
	}
}

// TestCLIResolvesASlugInOneRequest: GET /api/agents/{id} takes a slug too, so that resolving
// --agent SLUG makes no failing (404) request for the API's log.
func TestCLIResolvesASlugInOneRequest(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "sluggish", false)
	got, err := admin(p).GetAgent(context.Background(), "sluggish")
	if err != nil || got.AgentID != a.AgentID {
		t.Fatalf("GET /api/agents/sluggish = %+v, %v; want agent %s", got, err, a.AgentID)
	}
	if _, err := admin(p).GetAgent(context.Background(), "nobody"); err == nil {
		t.Error("GET /api/agents/nobody succeeded")
	}
}
