package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"svc/agent/agenttest"
	"svc/builder/gittest"
	"svc/bundle"
	"svc/client"
	"svc/runner/models/modelstest"
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
func newAgent(t *testing.T, p *benchPlatform, slug string, autoPromote bool) client.Agent {
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
func deployDir(t *testing.T, p *benchPlatform, agentID, dir, env string) client.Deployment {
	t.Helper()
	if _, err := admin(p).UploadDir(context.Background(), agentID, dir); err != nil {
		t.Fatal(err)
	}
	return redeploy(t, p, client.RedeployRequest{AgentID: agentID, Environment: env})
}

// redeploy starts a build and returns its deployment once it has settled (ready or failed).
func redeploy(t *testing.T, p *benchPlatform, req client.RedeployRequest) client.Deployment {
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

func TestStatus(t *testing.T) {
	p := startPlatform(t)
	a, repo, commit := newGitAgent(t, p, "hello", "hello")
	ctx := context.Background()
	prod := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID})
	if _, err := admin(p).Activate(ctx, prod.DeployID); err != nil {
		t.Fatal(err)
	}
	staging := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID, Environment: "staging"})
	repo.Commit(t, agenttest.Dir(t, "broken"), "break it")
	failed := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID})
	preview := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID, Environment: "preview-x", Branch: "main"})
	if failed.Status != client.StatusFailed || preview.Status != client.StatusFailed {
		t.Fatalf("builds of the broken commit: %s, %s; want both failed", failed.Status, preview.Status)
	}
	res := runCLI(t, p, "", "status", "--agent", "hello")
	if res.err != nil {
		t.Fatal(res.err)
	}
	// Ages are seconds here; the columns are compared word by word.
	var got [][]string
	for _, line := range strings.Split(regexp.MustCompile(`\b\d+s\b`).ReplaceAllString(res.stdout, "Ns"), "\n") {
		got = append(got, strings.Fields(line))
	}
	short := commit[:7]
	want := [][]string{
		{"Agent", "hello", "(" + a.AgentID + ")"},
		{"URL", a.URL},
		{},
		{"ENVIRONMENT", "ACTIVE", "COMMIT", "STATUS", "AGE", "NEWEST"},
		{"production", prod.DeployID, short, "ready", "Ns", failed.DeployID, "(failed,", "Ns)"},
		{"preview-x", "-", "-", "-", "-", preview.DeployID, "(failed,", "Ns)"},
		{"staging", staging.DeployID, short, "ready", "Ns", "-"},
		{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s\n%s", diff, res.stdout)
	}

	empty := newAgent(t, p, "empty", false)
	res = runCLI(t, p, "", "status", "--agent", empty.AgentID)
	if res.err != nil || !strings.Contains(res.stdout, "No deployments yet") {
		t.Errorf("status of an agent without deployments = %q, %v", res.stdout, res.err)
	}
}

// TestPrintStatus: the table's layout and ages, for deployments of every age and state.
func TestPrintStatus(t *testing.T) {
	a := client.Agent{AgentID: "ag_hello", Slug: "hello", URL: "http://hello.apps.localhost:8080"}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ready := func(id, env, commit string, ago time.Duration) client.Deployment {
		at := now.Add(-ago)
		return client.Deployment{DeployID: id, BuildID: "b" + id, AgentID: a.AgentID, Environment: env, Commit: commit,
			Status: client.StatusReady, IsActive: true, CreatedAt: at, ReadyAt: &at, ActivatedAt: &at}
	}
	deps := []client.Deployment{ // newest first
		{DeployID: "d4", AgentID: a.AgentID, Environment: "preview-x", Status: client.StatusBuilding, CreatedAt: now.Add(-72 * time.Hour)},
		{DeployID: "d3", AgentID: a.AgentID, Environment: "production", Status: client.StatusFailed, CreatedAt: now.Add(-5 * time.Minute)},
		ready("d2", "staging", "", 45*time.Second),
		ready("d1", "production", "0123456789abcdef0123456789abcdef01234567", 150*time.Minute),
	}
	var out bytes.Buffer
	if err := printStatus(&out, a, deps, now); err != nil {
		t.Fatal(err)
	}
	want := "Agent hello (ag_hello)\n" +
		"URL   " + a.URL + "\n" +
		"\n" +
		"ENVIRONMENT  ACTIVE  COMMIT   STATUS  AGE  NEWEST\n" +
		"production   d1      0123456  ready   2h   d3 (failed, 5m)\n" +
		"preview-x    -       -        -       -    d4 (building, 3d)\n" +
		"staging      d2      -        ready   45s  -\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// wantErr fails unless err's text is prefix, the platform's own words, then suffix.
func wantErr(t *testing.T, what string, err error, prefix, suffix string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.HasSuffix(err.Error(), suffix) || len(err.Error()) == len(prefix+suffix) {
		t.Errorf("%s = %v, want %q + the platform's reason + %q", what, err, prefix, suffix)
	}
}

func TestActivatePromoteRollback(t *testing.T) {
	dataDir := t.TempDir()
	p := startPlatformAt(t, dataDir) // the last refusal damages a bundle in the data dir
	a, repo, commit := newGitAgent(t, p, "hello", "hello")
	ctx := context.Background()
	first := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID}) // production: ready, not active
	res := runCLI(t, p, "", "activate", first.DeployID)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantLines(t, "activate", res.stdout, "Deployment "+first.DeployID+" is now active in production\n", "  build        "+first.BuildID,
		"  from         "+commit[:7]+" (main)", "  status       ready, active")

	redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID, Environment: "staging"}) // active in staging
	res = runCLI(t, p, "", "promote", "--agent", "hello", "--from", "staging")
	if res.err != nil {
		t.Fatal(res.err)
	}
	// A promotion builds nothing: it names the deployment it copied, not a build without a log.
	wantLines(t, "promote", res.stdout, "Promoted staging to production: deployment d", " is now active", "environment  production", "copied from  deployment d")
	if strings.Contains(res.stdout, "  build ") {
		t.Errorf("promote names a build:\n%s", res.stdout)
	}
	active, err := admin(p).ActiveDeployment(ctx, a.AgentID, "")
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

	// The platform's refusals, each explained.
	if s := p.call(t, "POST", "/api/agents/"+a.AgentID+"/commit-statuses", map[string]any{"commit": commit, "context": "svc/evals", "state": "failure"}, nil, nil); s != 201 && s != 200 {
		t.Fatalf("post a failing evals status = %d", s)
	}
	res = runCLI(t, p, "", "promote", "--agent", "hello", "--from", "staging")
	wantErr(t, "promote with failing evals", res.err, "promotion blocked: the svc/evals status of the source commit is pending or failing (", "); fix the evals or pass --force")
	if res := runCLI(t, p, "", "promote", "--agent", "hello", "--from", "staging", "--force"); res.err != nil {
		t.Errorf("promote --force with failing evals = %v", res.err)
	}
	res = runCLI(t, p, "", "promote", "--agent", "hello", "--from", "qa")
	if want := "refused: environment qa has no active deployment to promote"; res.err == nil || res.err.Error() != want {
		t.Errorf("promote from an environment with nothing active = %v, want %q", res.err, want)
	}
	res = runCLI(t, p, "", "rollback", "--agent", "hello", "--env", "staging")
	// Said once (not the platform's message again), with what makes a rollback possible.
	if res.err == nil || strings.Count(res.err.Error(), "no earlier deployment") != 1 || !strings.Contains(res.err.Error(), "once a newer deployment is active") {
		t.Errorf("rollback of an environment that had one deployment = %v", res.err)
	}
	if res := runCLI(t, p, "", "rollback", "--agent", "hello", "--env", "nowhere"); res.err == nil || !strings.Contains(res.err.Error(), "nothing to roll back") {
		t.Errorf("rollback of an empty environment = %v", res.err)
	}
	repo.Commit(t, agenttest.Dir(t, "broken"), "break it")
	failed := redeploy(t, p, client.RedeployRequest{AgentID: a.AgentID})
	res = runCLI(t, p, "", "activate", failed.DeployID)
	wantErr(t, "activate a failed deployment", res.err, "the deployment is not ready: its build has not succeeded (", "); follow it with `svc logs BUILD_ID -f`")
	var observer struct{ Token string }
	if s := p.call(t, "POST", "/api/tokens", map[string]any{"name": "watcher", "kind": "observer"}, nil, &observer); s != 201 {
		t.Fatalf("create an observer token = %d", s)
	}
	res = runCLI(t, nil, "", "activate", first.DeployID, "--url", p.url, "--token", observer.Token)
	wantErr(t, "activate with an observer token", res.err, "the token may not do this (", "): use an operator token bound to this agent, or an unbound one")
	if res := runCLI(t, p, "", "promote", "--agent", "hello"); res.err == nil || !strings.Contains(res.err.Error(), "--from") {
		t.Errorf("promote without --from = %v", res.err)
	}
	res = runCLI(t, nil, "", "promote", "--agent", "hello", "--from", "staging", "--force", "--url", p.url, "--token", "pk_bad")
	wantErr(t, "promote with a bad token", res.err, "the platform refused the token (", "): check SVC_TOKEN or --token")

	// A deployment whose bundle is gone from the object store is refused before anything changes.
	bundles, err := filepath.Glob(filepath.Join(dataDir, "objects", "bundles", a.Slug, "*"))
	if err != nil || len(bundles) == 0 {
		t.Fatalf("bundles = %v, %v", bundles, err)
	}
	for _, b := range bundles {
		if err := os.Remove(b); err != nil {
			t.Fatal(err)
		}
	}
	res = runCLI(t, p, "", "rollback", "--agent", "hello", active.DeployID)
	if want := "refused: the bundle of deployment " + active.DeployID + " is missing or does not open; nothing was changed"; res.err == nil || res.err.Error() != want {
		t.Errorf("rollback to a deployment without its bundle = %v, want %q", res.err, want)
	}
}

func TestToken(t *testing.T) {
	p := startPlatform(t)
	newAgent(t, p, "hello", false)
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
		if !tt.ok {
			if res.err == nil || !strings.Contains(res.err.Error(), "--ttl") {
				t.Errorf("--ttl %s: error %v, want one naming --ttl", tt.ttl, res.err)
			}
			continue
		}
		if !jwt.MatchString(res.stdout) {
			t.Errorf("--ttl %s printed %q, want only the token", tt.ttl, res.stdout)
			continue
		}
		// The token carries what was asked for.
		payload, err := base64.RawURLEncoding.DecodeString(strings.Split(res.stdout, ".")[1])
		var claims struct {
			ScopeID  string `json:"scope_id"`
			Exp, Iat int64
		}
		if err == nil {
			err = json.Unmarshal(payload, &claims)
		}
		ttl, _ := time.ParseDuration(tt.ttl)
		if err != nil || claims.ScopeID != "org-1" || claims.Exp-claims.Iat != int64(ttl/time.Second) {
			t.Errorf("--ttl %s: claims %+v, %v; want scope_id org-1 and a lifetime of %s", tt.ttl, claims, err, tt.ttl)
		}
	}
}

func TestChat(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	token := runtimeToken(t, p, a.AgentID)

	res := runCLI(t, p, "", "chat", "hello", "--message", "hi", "--context", "plan=pro", "--named-agent", "support")
	if res.err != nil || res.stdout != "echo: hi\n" || res.stderr != echoWarning {
		t.Fatalf("one-shot chat = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	// The session is the named agent's, with the context in its prompt.
	var list struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
			Agent     string
		}
	}
	agentGet(t, p, "hello", "/sessions/history", token, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Agent != "support" {
		t.Fatalf("sessions = %+v, want one of the support agent", list.Sessions)
	}
	var prompt struct {
		SystemPrompt string `json:"system_prompt"`
	}
	agentGet(t, p, "hello", "/inspect/context?session_id="+list.Sessions[0].SessionID, token, &prompt)
	if !strings.Contains(prompt.SystemPrompt, "You help customers on the pro plan.") {
		t.Errorf("system prompt = %q, want the context's plan in it", prompt.SystemPrompt)
	}

	// Interactive: the session continues between messages, /new starts another, /exit leaves.
	res = runCLI(t, p, "one\n\n  two  \n/new\nthree\n/exit\nnever\n", "chat", "--agent", "hello")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if want := "echo: one\necho: two\necho: three\n"; res.stdout != want {
		t.Errorf("interactive output = %q, want %q", res.stdout, want)
	}
	if diff := cmp.Diff([]string{"default: one, two", "default: three", "support: hi"}, chatSessions(t, p, "hello", token)); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}

	// --deployment talks to the pinned URL; --session continues (here: names) a session. This
	// agent has no production deployment, so its persistent URL does not answer.
	pinned := newAgent(t, p, "pinned", false)
	d := deployDir(t, p, pinned.AgentID, chatAgentDir(t), "preview-pin")
	if res := runCLI(t, p, "", "chat", "pinned", "-m", "x"); res.err == nil || !strings.Contains(res.err.Error(), "NO_ACTIVE_DEPLOYMENT") {
		t.Errorf("chat at the persistent URL of an agent without production = %v", res.err)
	}
	res = runCLI(t, p, "", "chat", "pinned", "--deployment", d.DeployID, "--session", "s-old", "-m", "pinned")
	if res.err != nil || res.stdout != "echo: pinned\n" {
		t.Fatalf("chat with --deployment = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	var h struct {
		Messages []struct{ Role, Content string }
	}
	agentGet(t, p, d.DeployID+"--pinned", "/sessions/history/s-old", runtimeToken(t, p, pinned.AgentID), &h)
	if len(h.Messages) == 0 || h.Messages[0].Content != "pinned" {
		t.Errorf("session s-old = %+v, want the message sent", h)
	}
}

func TestChatFrames(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")

	// The echo model calls the tool a message names: the call, its result (cut for the
	// terminal), then the answer.
	res := runCLI(t, p, "", "chat", "hello", "-m", `/tool load_knowledge {"name":"big"}`)
	want := "→ load_knowledge {\"name\":\"big\"}\n" +
		"← " + strings.Repeat("é", 300) + "…\n" +
		"echo: " + strings.Repeat("é", 400) + "\n"
	if diff := cmp.Diff(want, res.stdout); res.err != nil || diff != "" {
		t.Errorf("stdout (-want +got):\n%s\nerror %v", diff, res.err)
	}
	if res.stderr != echoWarning {
		t.Errorf("stderr = %q, want the echo model's warning", res.stderr)
	}
	res = runCLI(t, p, "", "chat", "hello", "-m", `/tool lookup {"q":"x","a":1}`)
	want = "→ lookup {\"q\":\"x\",\"a\":1}\n" +
		"← error: tool \"lookup\" is not available to this agent\n" +
		"echo: error: tool \"lookup\" is not available to this agent\n"
	if diff := cmp.Diff(want, res.stdout); res.err != nil || diff != "" {
		t.Errorf("stdout (-want +got):\n%s\nerror %v", diff, res.err)
	}

	// A model that fails: the error frame, and the turn's end. The third call answers, with
	// reasoning that is not shown.
	model := modelstest.NewOpenAIServer(t,
		modelstest.Turn{Status: 400, ErrorMessage: "provider down"},
		modelstest.Turn{Status: 400, ErrorMessage: "provider down"},
		modelstest.Turn{Reasoning: []string{"hidden"}, Text: []string{"Found ", "it."}})
	m := newAgent(t, p, "model", true)
	deployDir(t, p, m.AgentID, writeTree(t, map[string]string{
		"svc.json": `{"name":"model","version":"1","models":{"main":{"provider":"openai-compatible","model":"fake","baseUrl":"` + model.URL + `"}}}`,
	}), "production")
	res = runCLI(t, p, "", "chat", "model", "-m", "fail")
	if !isExit(res.err) || !strings.Contains(res.stderr, "error: model call failed: ") || !strings.Contains(res.stderr, "provider down") ||
		!strings.HasSuffix(res.stderr, "(turn ended: error)\n") {
		t.Errorf("one-shot with an error frame = %v, stderr %q; want exit 1 with the error", res.err, res.stderr)
	}
	// Interactive mode reports the error and goes on.
	res = runCLI(t, p, "fail\ngo\n", "chat", "model")
	if res.err != nil || res.stdout != "Found it.\n" || strings.Count(res.stderr, "error: model call failed") != 1 {
		t.Errorf("interactive with an error frame = %v, stdout %q, stderr %q", res.err, res.stdout, res.stderr)
	}
}

// TestChatRenderer: how each kind of frame is shown, including those the runtime sends only for
// tools and limits the tests above do not reach (a structured result, the turn limit).
func TestChatRenderer(t *testing.T) {
	var out, errOut bytes.Buffer
	r := &chatRenderer{out: &out, errOut: &errOut, atLineStart: true}
	for _, f := range []string{
		`{"type":"init","session_id":"s1"}`,
		`{"type":"warning","message":"no model configured: using echo"}`,
		`{"type":"text_delta","content":"Let me "}`,
		`{"type":"text_delta","content":"look."}`,
		`{"type":"tool_call_start","tool_name":"lookup","tool_id":"t1","parameters":{"q":"x","a":1}}`,
		`{"type":"tool_call_result","tool_id":"t1","status":"success","result":{"found": true}}`,
		`{"type":"tool_call_start","tool_name":"fail","tool_id":"t2","parameters":{}}`,
		`{"type":"tool_call_result","tool_id":"t2","status":"error","error":"boom"}`,
		`{"type":"tool_call_result","tool_id":"t3","status":"success","content":"` + strings.Repeat("é", 400) + `"}`,
		`{"type":"thinking_delta","content":"hidden"}`,
		`{"type":"text_delta","content":"Found it."}`,
		`{"type":"done","reason":"max_turns","turns":50}`,
	} {
		var frame client.Frame
		if err := json.Unmarshal([]byte(f), &frame); err != nil {
			t.Fatal(err)
		}
		if err := r.frame(frame); err != nil {
			t.Fatal(err)
		}
	}
	want := "Let me look.\n" +
		"→ lookup {\"q\":\"x\",\"a\":1}\n" +
		"← {\"found\":true}\n" +
		"→ fail {}\n" +
		"← error: boom\n" +
		"← " + strings.Repeat("é", 300) + "…\n" +
		"Found it.\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if want := "warning: no model configured: using echo\n(turn ended: max_turns)\n"; errOut.String() != want {
		t.Errorf("stderr = %q, want %q", errOut.String(), want)
	}
	if r.session != "s1" || r.failed {
		t.Errorf("renderer session %q, failed %v", r.session, r.failed)
	}
}

func TestChatRenewsAnExpiredToken(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	// In front of the platform, a runtime token expires after one turn: a chat that follows
	// another without a token minted in between reaches the runtime with its token's signature
	// spoiled, which the runtime refuses (401) as it refuses an expired token. (Tokens are told
	// apart by their minting, not their value: two minted in the same second for the same
	// claims are the same JWT.)
	target, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	mints, fresh := 0, false
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/agents/"+a.AgentID+"/tokens":
			mints, fresh = mints+1, true
		case r.URL.Path == "/chat/stream":
			if !fresh {
				r.Header.Set("Authorization", r.Header.Get("Authorization")+"x")
			}
			fresh = false
		}
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	res := runCLI(t, nil, "a\nb\nc\n", "chat", "hello", "--url", front.URL, "--token", p.token)
	if res.err != nil || res.stdout != "echo: a\necho: b\necho: c\n" {
		t.Errorf("chat across expiries = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if mints != 3 {
		t.Errorf("%d runtime tokens minted, want 3: one, then a new one after each refusal", mints)
	}
}

// writerFunc adapts a function to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestChatInterrupted(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	// This model streams a first chunk, then holds its answer open until the runtime leaves.
	model := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"Let me think"}, Hang: true})
	slow := newAgent(t, p, "slow", true)
	deployDir(t, p, slow.AgentID, writeTree(t, map[string]string{
		"svc.json": `{"name":"slow","version":"1","models":{"main":{"provider":"openai-compatible","model":"fake","baseUrl":"` + model.URL + `"}}}`,
	}), "production")
	tests := []struct {
		name, agent string
		pressedOn   string // Ctrl-C once stdout shows this
		want        string // stdout starts with it
	}{
		{"once the turn is over", "hello", "\n", "echo: hi\n"},
		{"while the answer streams", "slow", "Let me think", "Let me think\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			pressed := writerFunc(func(b []byte) (int, error) {
				if bytes.Contains(b, []byte(tt.pressedOn)) {
					cancel(errors.New("ctrl-c"))
				}
				return len(b), nil
			})
			// stdin stays open after the first line, as a terminal does.
			pr, pw := io.Pipe()
			defer pw.Close() //nolint:errcheck // ends the command's stdin reader
			res := runCLIWith(ctx, t, p, io.MultiReader(strings.NewReader("hi\n"), pr), pressed, "chat", tt.agent)
			if res.err != nil || !strings.HasPrefix(res.stdout, tt.want) {
				t.Errorf("interrupted chat = %q, %v; want %q and a quiet exit", res.stdout, res.err, tt.want)
			}
		})
	}
}

func TestChatRefusals(t *testing.T) {
	p := startPlatform(t)
	newAgent(t, p, "hello", false)
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
		{"no deployment", []string{"chat", "hello", "-m", "x"}, "NO_ACTIVE_DEPLOYMENT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, p, "", tt.args...)
			if res.err == nil || !strings.Contains(res.err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want it to contain %q", res.err, tt.wantErr)
			}
		})
	}
	// Without a production deployment, chat says what could serve: promote or --deployment.
	if res := runCLI(t, p, "", "chat", "hello", "-m", "x"); res.err == nil || !strings.Contains(res.err.Error(), "svc promote --agent hello --from ENV") ||
		!strings.Contains(res.err.Error(), "--deployment DEPLOY_ID") {
		t.Errorf("chat without any deployment = %v", res.err)
	}
	a := newAgent(t, p, "previewed", false)
	d := deployDir(t, p, a.AgentID, agentDir(t), "preview")
	res := runCLI(t, p, "", "chat", "previewed", "-m", "x")
	for _, want := range []string{"NO_ACTIVE_DEPLOYMENT", "deployment " + d.DeployID + " is active in preview",
		"svc promote --agent previewed --from preview", "svc chat previewed --deployment " + d.DeployID} {
		if res.err == nil || !strings.Contains(res.err.Error(), want) {
			t.Errorf("chat with only a preview deployment = %v, want %q in it", res.err, want)
		}
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
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	in, typed := io.Pipe()
	defer typed.Close()
	go func() {
		_, _ = io.WriteString(typed, "one\n/exit\n") // and nothing more: the writer stays open
	}()
	done := make(chan cliResult, 1)
	go func() { done <- runCLIWith(context.Background(), t, p, in, nil, "chat", "--agent", "hello") }()
	select {
	case res := <-done:
		if res.err != nil || res.stdout != "echo: one\n" {
			t.Errorf("chat = %q, %v", res.stdout, res.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("svc chat did not leave on /exit while its input stayed open")
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
