package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"svc/agent/agenttest"
	"svc/bundle"
	"svc/client"
)

// recorded is the last request a rawServer received, with its body.
type recorded struct {
	*http.Request
	body string
}

// rawServer answers every request with status, content type and body, and records the last request.
func rawServer(t *testing.T, status int, contentType, body string) (*httptest.Server, *recorded) {
	t.Helper()
	last := &recorded{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		last.Request, last.body = r.Clone(context.Background()), string(b)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, last
}

func TestParseBaseURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://127.0.0.1:8080":   "http://127.0.0.1:8080",
		"https://svc.example/":    "https://svc.example",
		" http://h:1/prefix/ ":    "http://h:1/prefix",
		"ftp://h":                 "",
		"127.0.0.1:8080":          "",
		"http://":                 "",
		"http://h/?q=1":           "",
		"http://h:1/%zz":          "",
		"http://svc.example/#top": "",
	} {
		u, err := client.ParseBaseURL(raw)
		switch {
		case want == "" && err == nil:
			t.Errorf("ParseBaseURL(%q) = %v, want an error", raw, u)
		case want != "" && (err != nil || u.String() != want):
			t.Errorf("ParseBaseURL(%q) = %v, %v; want %s", raw, u, err, want)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        client.Error
		text        string
	}{
		{"envelope", 422, "application/json", `{"error":{"code":"NOTHING_TO_ROLL_BACK","message":"no earlier deployment"}}`,
			client.Error{Status: 422, Code: "NOTHING_TO_ROLL_BACK", Message: "no earlier deployment"},
			"NOTHING_TO_ROLL_BACK: no earlier deployment (HTTP 422)"},
		{"problems beside the error", 400, "application/json",
			`{"error":{"code":"INVALID_SOURCE","message":"invalid"},"problems":[{"file":"svc.json","line":3,"message":"unknown field x"},{"file":"tools/t/tool.json","message":"missing"}]}`,
			client.Error{Status: 400, Code: "INVALID_SOURCE", Message: "invalid", Problems: []client.Problem{
				{File: "svc.json", Line: 3, Message: "unknown field x"}, {File: "tools/t/tool.json", Message: "missing"}}},
			"INVALID_SOURCE: invalid (HTTP 400)\n  svc.json:3: unknown field x\n  tools/t/tool.json: missing"},
		{"problems inside the error", 400, "application/json",
			`{"error":{"code":"INVALID_SOURCE","message":"invalid","problems":[{"file":"a","message":"b"}]}}`,
			client.Error{Status: 400, Code: "INVALID_SOURCE", Message: "invalid", Problems: []client.Problem{{File: "a", Message: "b"}}},
			"INVALID_SOURCE: invalid (HTTP 400)\n  a: b"},
		{"runtime envelope", 400, "application/json", `{"error":"invalid_request","message":"agent: no agent \"x\"; the agents are default","field":"agent"}`,
			client.Error{Status: 400, Code: "invalid_request", Message: `agent: no agent "x"; the agents are default`, Field: "agent"},
			`invalid_request: agent: no agent "x"; the agents are default (HTTP 400)`},
		{"runtime envelope without a message", 409, "application/json", `{"error":"turn_in_progress"}`,
			client.Error{Status: 409, Code: "turn_in_progress"}, "turn_in_progress (HTTP 409)"},
		{"plain text", 502, "text/plain", "bad gateway\nupstream down\n",
			client.Error{Status: 502, Message: "bad gateway upstream down"}, "bad gateway upstream down (HTTP 502)"},
		{"empty body", 503, "text/plain", "",
			client.Error{Status: 503}, "Service Unavailable (HTTP 503)"},
		{"JSON without an envelope", 500, "application/json", `{"oops":1}`,
			client.Error{Status: 500, Message: `{"oops":1}`}, `{"oops":1} (HTTP 500)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := rawServer(t, tt.status, tt.contentType, tt.body)
			_, err := client.New(srv.URL, "pk_x", nil).Deployment(context.Background(), "d1")
			var got *client.Error
			if !errors.As(err, &got) {
				t.Fatalf("error = %v, want a *client.Error", err)
			}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got.Error() != tt.text {
				t.Errorf("Error() = %q, want %q", got.Error(), tt.text)
			}
		})
	}
}

func TestErrorBodyIsBounded(t *testing.T) {
	srv, _ := rawServer(t, 500, "text/html", "<html>"+strings.Repeat("é", 2000)+"</html>")
	_, err := client.New(srv.URL, "", nil).Deployment(context.Background(), "d1")
	var e *client.Error
	if !errors.As(err, &e) || len(e.Message) > 310 || !strings.HasSuffix(e.Message, "…") || !utf8.ValidString(e.Message) {
		t.Errorf("error = %v, want a message cut to about 300 bytes", err)
	}
}

func TestRequests(t *testing.T) {
	srv, last := rawServer(t, 200, "application/json", `{"deployId":"d1","buildId":"b1","environment":"staging"}`)
	c := client.New(srv.URL+"/", "pk_tok", nil)
	ctx := context.Background()
	calls := []struct {
		name   string
		call   func() error
		method string
		path   string
		query  string
		body   string
	}{
		{"redeploy", func() error {
			_, err := c.Redeploy(ctx, client.RedeployRequest{AgentID: "a/1", Environment: "staging", ReuseBuild: true, SourceVersionID: "sv1"})
			return err
		}, "POST", "/api/deployments/redeploy", "", `{"agentId":"a/1","environment":"staging","reuseBuild":true,"sourceVersionId":"sv1"}`},
		{"deployment", func() error { _, err := c.Deployment(ctx, "d/1"); return err }, "GET", "/api/deployments/d%2F1", "", ""},
		{"activate", func() error { _, err := c.Activate(ctx, "d1"); return err }, "POST", "/api/deployments/d1/activate", "", ""},
		{"promote", func() error {
			_, err := c.Promote(ctx, client.PromoteRequest{AgentID: "a", FromEnvironment: "staging", Force: true})
			return err
		}, "POST", "/api/deployments/promote", "", `{"agentId":"a","fromEnvironment":"staging","force":true}`},
		{"rollback", func() error {
			_, err := c.Rollback(ctx, client.RollbackRequest{AgentID: "a", DeployID: "d0"})
			return err
		}, "POST", "/api/deployments/rollback", "", `{"agentId":"a","deployId":"d0"}`},
		{"active deployment defaults to production", func() error { _, err := c.ActiveDeployment(ctx, "a", ""); return err },
			"GET", "/api/agents/a/active-deployment", "environment=production", ""},
		{"build status", func() error { _, err := c.BuildStatus(ctx, "b1"); return err }, "GET", "/api/builds/b1/status", "", ""},
		{"deploy settings", func() error { _, err := c.DeploySettings(ctx, "a"); return err }, "GET", "/api/agents/a/deploy-settings", "", ""},
		{"logs", func() error { return c.Logs(ctx, "b1", io.Discard) }, "GET", "/api/builds/b1/logs", "", ""},
		{"follow logs", func() error { return c.FollowLogs(ctx, "b1", io.Discard) }, "GET", "/api/builds/b1/logs", "follow=1", ""},
		{"set secret", func() error { return c.SetSecret(ctx, "desk", "DB_URL", "v") }, "PUT", "/api/agents/desk/secrets/DB_URL", "", `{"value":"v"}`},
		{"list secrets", func() error { _, err := c.ListSecrets(ctx, "desk"); return err }, "GET", "/api/agents/desk/secrets", "", ""},
		{"delete secret", func() error { return c.DeleteSecret(ctx, "desk", "DB_URL") }, "DELETE", "/api/agents/desk/secrets/DB_URL", "", ""},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			if last.Method != tt.method || last.URL.EscapedPath() != tt.path || last.URL.RawQuery != tt.query {
				t.Errorf("request = %s %s?%s, want %s %s?%s", last.Method, last.URL.EscapedPath(), last.URL.RawQuery, tt.method, tt.path, tt.query)
			}
			if got := last.Header.Get("Authorization"); got != "Bearer pk_tok" {
				t.Errorf("Authorization = %q", got)
			}
			if last.body != tt.body {
				t.Errorf("body = %s, want %s", last.body, tt.body)
			}
			if ct := last.Header.Get("Content-Type"); (tt.body != "") != (ct == "application/json") {
				t.Errorf("Content-Type = %q with body %q", ct, tt.body)
			}
		})
	}
}

func TestListShapes(t *testing.T) {
	ctx := context.Background()
	for name, body := range map[string]string{
		"bare array": `[{"agentId":"a1","slug":"one"},{"agentId":"a2","slug":"two"}]`,
		"wrapped":    `{"agents":[{"agentId":"a1","slug":"one"},{"agentId":"a2","slug":"two"}],"next":null}`,
	} {
		srv, _ := rawServer(t, 200, "application/json", body)
		agents, err := client.New(srv.URL, "", nil).ListAgents(ctx)
		if err != nil || len(agents) != 2 || agents[1].Slug != "two" {
			t.Errorf("%s: ListAgents = %+v, %v", name, agents, err)
		}
	}
	for name, body := range map[string]string{
		"bare array": `[{"deployId":"d2","createdAt":"2026-01-02T03:04:05Z","readyAt":null},{"deployId":"d1","createdAt":"2026-01-01T00:00:00Z"}]`,
		"wrapped":    `{"deployments":[{"deployId":"d2","createdAt":"2026-01-02T03:04:05Z"},{"deployId":"d1","createdAt":"2026-01-01T00:00:00Z"}]}`,
	} {
		srv, last := rawServer(t, 200, "application/json", body)
		deps, err := client.New(srv.URL, "", nil).ListDeployments(ctx, "a1", "preview-x y")
		if err != nil || len(deps) != 2 || deps[0].DeployID != "d2" || deps[0].CreatedAt.Day() != 2 {
			t.Errorf("%s: ListDeployments = %+v, %v", name, deps, err)
		}
		if last.URL.Query().Get("environment") != "preview-x y" {
			t.Errorf("environment query = %q", last.URL.RawQuery)
		}
	}
	for name, body := range map[string]string{
		"wrong key": `{"items":[]}`,
		"a string":  `"x"`,
		"bad items": `[1,2]`,
	} {
		srv, _ := rawServer(t, 200, "application/json", body)
		if _, err := client.New(srv.URL, "", nil).ListAgents(ctx); err == nil {
			t.Errorf("%s: ListAgents succeeded, want a decode error", name)
		}
	}
	srv, _ := rawServer(t, 200, "application/json", "")
	if _, err := client.New(srv.URL, "", nil).Deployment(ctx, "d"); err == nil || !strings.Contains(err.Error(), "empty body") {
		t.Errorf("empty answer: %v, want an error naming the empty body", err)
	}
}

func TestResolveAgent(t *testing.T) {
	p := startPlatform(t)
	ctx := context.Background()
	hello, err := p.c.CreateAgent(ctx, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{hello.AgentID, "hello"} {
		got, err := p.c.ResolveAgent(ctx, key)
		if err != nil || got.AgentID != hello.AgentID || got.Slug != "hello" {
			t.Errorf("ResolveAgent(%q) = %+v, %v", key, got, err)
		}
	}
	_, err = p.c.ResolveAgent(ctx, "nope")
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeNotFound || !strings.Contains(e.Message, `"nope"`) {
		t.Errorf("ResolveAgent(nope) = %v, want NOT_FOUND naming it", err)
	}
	if _, err := p.c.ResolveAgent(ctx, ""); err == nil {
		t.Error("ResolveAgent(\"\") succeeded")
	}
	// Secrets, by slug: set, listed by name, removed; removing one that is not set is NOT_FOUND.
	if err := p.c.SetSecret(ctx, "hello", "DB_URL", "sqlite:/tmp/x.db"); err != nil {
		t.Fatal(err)
	}
	if list, err := p.c.ListSecrets(ctx, hello.AgentID); err != nil || len(list) != 1 || list[0].Name != "DB_URL" || list[0].UpdatedAt.IsZero() {
		t.Errorf("ListSecrets = %+v, %v", list, err)
	}
	if err := p.c.DeleteSecret(ctx, "hello", "DB_URL"); err != nil {
		t.Fatal(err)
	}
	if err := p.c.DeleteSecret(ctx, "hello", "DB_URL"); !errors.As(err, &e) || e.Code != client.CodeNotFound {
		t.Errorf("DeleteSecret of a secret that is not set = %v, want NOT_FOUND", err)
	}
	// A refusal other than 404 is not hidden behind a slug search.
	_, err = client.New(p.url, "pk_wrong", nil).ResolveAgent(ctx, "hello")
	if !errors.As(err, &e) || e.Status != 401 || e.Code != client.CodeUnauthenticated {
		t.Errorf("ResolveAgent with a bad token = %v, want 401 UNAUTHENTICATED", err)
	}
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

func TestUploadDir(t *testing.T) {
	p := startPlatform(t)
	ctx := context.Background()
	a, err := p.c.CreateAgent(ctx, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"svc.json": `{"name":"hello","version":"1"}`, "AGENT.md": "hi"}
	dir := writeTree(t, map[string]string{"svc.json": want["svc.json"], "AGENT.md": want["AGENT.md"], ".git/config": "x"})
	sv, err := p.c.UploadDir(ctx, a.AgentID, dir)
	if err != nil {
		t.Fatal(err)
	}
	// The digest is of the tree the platform stored: exactly these files, .git left out.
	if d := treeDigest(t, want); sv.Digest != d {
		t.Errorf("digest = %s, want %s, the digest of %v", sv.Digest, d, want)
	}
	again, err := p.c.UploadDir(ctx, a.AgentID, dir)
	if err != nil || again.Digest != sv.Digest || again.SourceVersionID == sv.SourceVersionID {
		t.Errorf("second upload = %+v, %v; want a new version with the same digest %s", again, err, sv.Digest)
	}

	// A refused tree keeps every problem.
	if err := os.Remove(filepath.Join(dir, "svc.json")); err != nil {
		t.Fatal(err)
	}
	_, err = p.c.UploadDir(ctx, a.AgentID, dir)
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeInvalidSource || len(e.Problems) != 1 || e.Problems[0].File != "svc.json" {
		t.Errorf("upload without svc.json = %v, want INVALID_SOURCE naming svc.json", err)
	}
	if _, err := p.c.UploadDir(ctx, a.AgentID, filepath.Join(dir, "missing")); err == nil {
		t.Error("upload of a missing folder succeeded")
	}
}

func TestLogsAndDeployFlow(t *testing.T) {
	p := startPlatform(t)
	ctx := context.Background()
	a, err := p.c.CreateAgent(ctx, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	sv, err := p.c.UploadDir(ctx, a.AgentID, agenttest.Dir(t, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.c.Redeploy(ctx, client.RedeployRequest{AgentID: a.AgentID, Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Environment != "staging" || r.Reused {
		t.Errorf("redeploy = %+v, want a new staging build", r)
	}

	// Following the log returns once the build has ended, with every line: "<time> [step] message".
	var log strings.Builder
	if err := p.c.FollowLogs(ctx, r.BuildID, &log); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	var steps []string
	for _, line := range lines {
		m := logLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("log line %q is not \"<time> [step] message\"; the log:\n%s", line, log.String())
		}
		if len(steps) == 0 || steps[len(steps)-1] != m[1] {
			steps = append(steps, m[1])
		}
	}
	if diff := cmp.Diff([]string{"start", "fetch", "validate", "compile", "pack", "upload", "verify", "done"}, steps); diff != "" {
		t.Errorf("log steps (-want +got):\n%s", diff)
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "[done] deployment "+r.DeployID+" ready and active in staging") {
		t.Errorf("last log line = %q", last)
	}
	if !strings.Contains(log.String(), "[fetch] fetched source version "+sv.SourceVersionID) {
		t.Errorf("the log does not name the newest source version %s:\n%s", sv.SourceVersionID, log.String())
	}

	b, err := p.c.BuildStatus(ctx, r.BuildID)
	if err != nil || !b.Finished() || b.Status != client.BuildSucceeded || len(b.Steps) == 0 || b.StartedAt == nil || b.FinishedAt == nil {
		t.Errorf("build = %+v, %v", b, err)
	}
	// A staging build becomes active: the deployment serves as soon as its build has ended.
	d, err := p.c.Deployment(ctx, r.DeployID)
	if err != nil || !d.Serving() || !d.Settled() || d.SourceVersionID != sv.SourceVersionID || d.URL != p.agentURL("hello", r.DeployID) {
		t.Errorf("deployment = %+v, %v; want ready and active, built from %s", d, err, sv.SourceVersionID)
	}
	active, err := p.c.ActiveDeployment(ctx, a.AgentID, "staging")
	if err != nil || active.DeployID != r.DeployID {
		t.Errorf("active = %+v, %v", active, err)
	}
	var e *client.Error
	if _, err := p.c.ActiveDeployment(ctx, a.AgentID, ""); !errors.As(err, &e) || e.Status != 404 {
		t.Errorf("active production deployment = %v, want 404: nothing was deployed there", err)
	}
	// The log of a finished build reads the same without following.
	var again strings.Builder
	if err := p.c.Logs(ctx, r.BuildID, &again); err != nil || again.String() != log.String() {
		t.Errorf("log = %q, %v; want the followed one", again.String(), err)
	}
	if err := p.c.Logs(ctx, "b-missing", io.Discard); !errors.As(err, &e) || e.Code != client.CodeNotFound {
		t.Errorf("logs of a missing build = %v, want NOT_FOUND", err)
	}
	// A follow ends with ctx.
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(errors.New("user left"))
	if err := p.c.FollowLogs(cctx, r.BuildID, io.Discard); err == nil {
		t.Error("follow with a cancelled ctx succeeded")
	}
}

// logLine is a build log line: an RFC 3339 time, the step in brackets, the message.
var logLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+Z \[([a-z]+)\] \S`)
