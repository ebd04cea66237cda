package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/models"
	"svc/runner/runtime"
)

// queuedFires records the fires a runtime enqueues; nothing runs them, so they stay queued.
type queuedFires struct {
	mu   sync.Mutex
	list []runtime.AutomationFire
}

func (q *queuedFires) fire(_ context.Context, f runtime.AutomationFire) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.list = append(q.list, f)
	return nil
}

func (q *queuedFires) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.list)
}

// startAutomationRuntime serves the hello chat agent's runtime with automations kept in SQLite
// (the registry's store) and AUTH_TOKEN as its trusted bearer; svc automations reaches it with
// --runtime.
func startAutomationRuntime(t *testing.T) (string, *queuedFires) {
	t.Helper()
	ctx := context.Background()
	cipher, err := registry.NewCipher([]byte(strings.Repeat("c", registry.SecretKeySize)))
	if err != nil {
		t.Fatal(err)
	}
	st := registry.NewStores(dbtest.SQLite(t), cipher, nil, nil)
	row, err := st.Agents.Create(ctx, "hello", "hello")
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.LoadDir(chatAgentDir(t))
	if err != nil {
		t.Fatal(err)
	}
	fires := &queuedFires{}
	rt, err := runtime.New(runtime.Options{Agent: ag, AgentID: row.ID, AuthToken: "dev-token",
		DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"},
		Automations:  &runtime.Automations{Store: st.Automations, Fire: fires.fire}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(func() { srv.Close(); _ = rt.Close(context.Background()) })
	t.Setenv("AUTH_TOKEN", "dev-token")
	return srv.URL, fires
}

// createdID is the id in create's "automation ID created" line.
func createdID(t *testing.T, res cliResult) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^automation (\S+) created: `).FindStringSubmatch(res.stdout)
	if res.err != nil || m == nil {
		t.Fatalf("create = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	return m[1]
}

// rowOf is the line of the table out that holds id.
func rowOf(t *testing.T, out, id string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, id+" ") {
			return line
		}
	}
	t.Fatalf("no row of %s in:\n%s", id, out)
	return ""
}

// TestAutomationsCommands: svc automations create (flags, --file, stdin), list, pause, resume,
// run, runs and delete against a runtime serving automations, and the refusals naming the flag
// or the field at fault.
func TestAutomationsCommands(t *testing.T) {
	rtURL, fires := startAutomationRuntime(t)
	cli := func(stdin string, args ...string) cliResult {
		t.Helper()
		return runCLI(t, nil, stdin, append(args, "--runtime", rtURL)...)
	}

	// Create from flags, from a file, and an event trigger from stdin.
	brief := createdID(t, cli("", "automations", "create", "--name", "morning brief", "--cron", "0 7 * * 1-5", "--timezone", "Europe/Oslo", "--message", "Summarise yesterday"))
	file := filepath.Join(t.TempDir(), "every.json")
	if err := os.WriteFile(file, []byte(`{"name": "poll", "trigger": {"every": "15m"}, "action": {"message": "check"}, "overlap": "queue"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	poll := createdID(t, cli("", "automations", "create", "--file", file))
	res := cli(`{"name": "orders", "trigger": {"event": true}, "action": {"message": "an order"}}`, "automations", "create", "-f", "-")
	orders := createdID(t, res)
	if !regexp.MustCompile(`(?m)^secret: whsec_\S+$`).MatchString(res.stdout) || !strings.Contains(res.stderr, "shown only this once") ||
		!strings.Contains(res.stderr, rtURL+"/api/automations/"+orders+"/events") {
		t.Errorf("event trigger create = %q (stderr %q): want its secret once, and how to sign", res.stdout, res.stderr)
	}

	res = cli("", "automations", "list")
	if res.err != nil || !strings.HasPrefix(res.stdout, "ID ") || strings.Contains(res.stdout, "whsec_") {
		t.Fatalf("list = %q, %v", res.stdout, res.err)
	}
	for id, want := range map[string][]string{
		brief:  {"morning brief", "0 7 * * 1-5 Europe/Oslo", "message", "yes", "in "},
		poll:   {"poll", "every 15m", "message", "yes", "in "},
		orders: {"orders", "event", "message", "yes", " -"},
	} {
		row := rowOf(t, res.stdout, id)
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("list row of %s = %q, lacks %q", id, row, w)
			}
		}
	}
	res = cli("", "automations", "list", "--json")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &listed); err != nil || len(listed) != 3 {
		t.Errorf("list --json = %q (%v), want 3 automations", res.stdout, err)
	}

	// Pause, then resume.
	res = cli("", "automations", "pause", brief)
	if res.err != nil || !strings.HasPrefix(res.stdout, "automation "+brief+" paused") {
		t.Errorf("pause = %q, %v", res.stdout, res.err)
	}
	if row := rowOf(t, cli("", "automations", "list").stdout, brief); !strings.Contains(row, "paused") || !strings.HasSuffix(row, " -") {
		t.Errorf("paused row = %q, want paused with no next fire", row)
	}
	res = cli("", "automations", "resume", brief)
	if res.err != nil || !strings.HasPrefix(res.stdout, "automation "+brief+" resumed; next fire in ") {
		t.Errorf("resume = %q, %v", res.stdout, res.err)
	}
	if row := rowOf(t, cli("", "automations", "list").stdout, brief); !strings.Contains(row, "yes") {
		t.Errorf("resumed row = %q, want enabled", row)
	}

	// Run now: the fire is queued, and its run listed.
	res = cli("", "automations", "runs", brief)
	if res.err != nil || !strings.Contains(res.stdout, "has no runs yet") {
		t.Errorf("runs before any = %q, %v", res.stdout, res.err)
	}
	res = cli("", "automations", "run", brief)
	if res.err != nil || !strings.HasPrefix(res.stdout, "fire queued at ") || !strings.Contains(res.stdout, "svc automations runs "+brief) {
		t.Errorf("run = %q, %v", res.stdout, res.err)
	}
	if fires.count() != 1 {
		t.Errorf("%d fires enqueued, want 1", fires.count())
	}
	res = cli("", "automations", "runs", brief)
	wantLines(t, "runs", res.stdout, "FIRE TIME", "STATUS", "SESSION", "DONE/ERROR", "\n", " queued ")
	if res.err != nil {
		t.Errorf("runs: %v", res.err)
	}

	// Delete: the id is gone.
	res = cli("", "automations", "delete", poll)
	if res.err != nil || !strings.HasPrefix(res.stdout, "automation "+poll+" deleted") {
		t.Errorf("delete = %q, %v", res.stdout, res.err)
	}

	// In another scope (AUTH_TOKEN is trusted, so it may name one) there is nothing.
	res = cli("", "automations", "list", "--scope", "team-a")
	if res.err != nil || !strings.Contains(res.stdout, "no automations in this scope") {
		t.Errorf("list --scope team-a = %q, %v", res.stdout, res.err)
	}

	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"bad cron", "", []string{"create", "--name", "x", "--cron", "not a cron", "--message", "m"}, "field trigger.cron: "},
		{"unknown tool", "", []string{"create", "--name", "x", "--every", "1h", "--tool", "nope"}, "field action.tool: "},
		{"deleted id", "", []string{"runs", poll}, "no automation " + poll + " in this scope; list them with `svc automations list --runtime " + rtURL + "`"},
		{"other scope's id", "", []string{"pause", brief, "--scope", "team-a"}, "no automation " + brief + " in this scope; list them with `svc automations list --runtime " + rtURL + " --scope team-a`"},
		{"file and flags", "", []string{"create", "-f", file, "--name", "x"}, "--file and --name are exclusive"},
		{"no trigger", "", []string{"create", "--name", "x", "--message", "m"}, "give one trigger"},
		{"two triggers", "", []string{"create", "--name", "x", "--every", "1h", "--event", "--message", "m"}, "give one trigger"},
		{"no action", "", []string{"create", "--name", "x", "--every", "1h"}, "give one action"},
		{"timezone without cron", "", []string{"create", "--name", "x", "--every", "1h", "--timezone", "UTC", "--message", "m"}, "--timezone goes with --cron only"},
		{"params not an object", "", []string{"create", "--name", "x", "--every", "1h", "--tool", "t", "--params", "[1]"}, "--params \"[1]\": want a JSON object"},
		{"file not an object", "[]", []string{"create", "-f", "-"}, "--file -: want the automation record as a JSON object"},
		{"no name", "", []string{"create", "--every", "1h", "--message", "m"}, "--name is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := cli(tt.stdin, append([]string{"automations"}, tt.args...)...)
			if res.err == nil || !strings.Contains(res.err.Error(), tt.want) {
				t.Errorf("%v = %v, want an error saying %q", tt.args, res.err, tt.want)
			}
		})
	}
	if fires.count() != 1 {
		t.Errorf("the refusals enqueued fires: %d, want 1", fires.count())
	}
}

// TestAutomationsRefusedConnection: a runtime or platform that is not there is named, with what
// to check, whichever way svc automations (or svc chat, which resolves the runtime the same way)
// reaches the agent.
func TestAutomationsRefusedConnection(t *testing.T) {
	srv := httptest.NewServer(nil)
	gone := srv.URL
	srv.Close()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"runtime", []string{"automations", "list", "--runtime", gone}, "no runtime answers at " + gone + " (connection refused)"},
		{"platform", []string{"automations", "list", "hello", "--url", gone, "--token", "pk_x"}, "no platform answers at " + gone + " (connection refused)"},
		{"api key", []string{"automations", "list", "hello", "--url", gone, "--api-key", "ak_x"}, "no platform answers at " + gone + " (connection refused)"},
		{"chat, api key", []string{"chat", "hello", "-m", "hi", "--url", gone, "--api-key", "ak_x"}, "no platform answers at " + gone + " (connection refused)"},
		{"chat, runtime", []string{"chat", "-m", "hi", "--runtime", gone}, "no runtime answers at " + gone + " (connection refused)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, nil, "", tt.args...)
			if res.err == nil || !strings.Contains(res.err.Error(), tt.want) {
				t.Errorf("%v on a closed port = %v, want %q", tt.args, res.err, tt.want)
			}
		})
	}
}

// TestAutomationsThroughThePlatform: with the platform token, svc automations mints a runtime
// token as svc chat does and reaches the agent's runtime through the platform's listener: it
// creates an automation, runs it now, and sees the run done with its session, on svc up.
func TestAutomationsThroughThePlatform(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	res := runCLI(t, p, "", "automations", "list", "hello")
	if res.err != nil || !strings.HasPrefix(res.stdout, "hello has no automations in this scope") {
		t.Fatalf("automations list through the platform = %q, %v", res.stdout, res.err)
	}
	res = runCLI(t, p, "", "automations", "create", "hello", "--name", "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Oslo", "--message", "report")
	if res.err != nil {
		t.Fatalf("create = %q, %v", res.stdout, res.err)
	}
	id := strings.Fields(strings.TrimPrefix(res.stdout, "automation "))[0]
	if res := runCLI(t, p, "", "automations", "run", "hello", id); res.err != nil || !strings.Contains(res.stdout, "fire queued") {
		t.Fatalf("run = %q, %v", res.stdout, res.err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		res = runCLI(t, p, "", "automations", "runs", "hello", id)
		if res.err == nil && strings.Contains(res.stdout, "done") && strings.Contains(res.stdout, "ses_") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs never showed the run done: %q, %v", res.stdout, res.err)
		}
	}
	if res := runCLI(t, p, "", "automations", "pause", "hello", id); res.err != nil {
		t.Fatalf("pause = %q, %v", res.stdout, res.err)
	}
	if res := runCLI(t, p, "", "automations", "list", "hello"); res.err != nil || !strings.Contains(res.stdout, "paused") {
		t.Errorf("list after pause = %q, %v", res.stdout, res.err)
	}
}
