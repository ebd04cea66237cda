package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"svc/agent/agenttest"
	"svc/automations"
	"svc/registry"
)

// upAgent creates an agent of the example tree name on p, deploys it to production and returns
// its id, slug, deployment and a runtime token of it minted for user (none: "").
func upAgent(t testing.TB, p *benchPlatform, name, tree, user string) (agentID, slug, deployID, token string) {
	t.Helper()
	var a struct{ AgentID, Slug string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": name}, nil, &a)
	var sv struct{ SourceVersionID string }
	p.call(t, "POST", "/api/agents/"+a.AgentID+"/source-versions", map[string]any{"files": agenttest.Files(t, tree)}, nil, &sv)
	var rd struct{ DeployID string }
	p.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": a.AgentID}, nil, &rd)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		var d struct{ Status string }
		p.call(t, "GET", "/api/deployments/"+rd.DeployID, nil, nil, &d)
		if d.Status == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment %s: %s", rd.DeployID, d.Status)
		}
	}
	p.call(t, "POST", "/api/deployments/"+rd.DeployID+"/activate", nil, nil, nil)
	var tok struct{ Token string }
	req := map[string]any{}
	if user != "" {
		req["user_id"] = user
	}
	p.call(t, "POST", "/api/agents/"+a.AgentID+"/tokens", req, nil, &tok)
	return a.AgentID, a.Slug, rd.DeployID, tok.Token
}

// upCall calls path on the agent slug of p with token and decodes the JSON answer into out.
func upCall(t testing.TB, p *benchPlatform, slug, token, method, path string, body any, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, p.url+path, requestBody(body))
	req.Host = slug + ".apps.localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

type runsView struct {
	Runs []struct {
		FireTime  time.Time `json:"fire_time"`
		Status    string
		SessionID string `json:"session_id"`
		Error     string
	}
}

// TestAutomationCatchUpAfterDowntime: svc up is down for 3 hours under an hourly automation
// with catchup 1h. When it comes back, the fire of the last hour runs once, the two before are
// counted as missed, and the schedule goes on from the next hour.
func TestAutomationCatchUpAfterDowntime(t *testing.T) {
	dataDir := t.TempDir()
	p := startPlatformAt(t, dataDir)
	_, slug, _, token := upAgent(t, p, "nightly", "hello", "")
	// An hourly cron whose minute is half an hour from now: its last fire time is about 30
	// minutes ago, whatever the time the test runs.
	now := time.Now().UTC()
	minute := (now.Minute() + 30) % 60
	hour := now.Truncate(time.Hour).Add(time.Duration(minute) * time.Minute)
	if hour.After(now) {
		hour = hour.Add(-time.Hour)
	}
	var created struct{ ID string }
	if s := upCall(t, p, slug, token, "POST", "/api/automations", map[string]any{
		"name": "hourly", "trigger": map[string]any{"cron": fmt.Sprintf("%d * * * *", minute)}, "action": map[string]any{"message": "report"}, "catchup": "1h",
	}, &created); s != 201 {
		t.Fatalf("create = %d", s)
	}
	p.cancel()

	// The platform went down 3 hours ago, before the fire of 2 hours before the last one.
	db := dataDB(t, dataDir)
	if err := db.Exec(`UPDATE automations SET next_fire_at = ? WHERE id = ?`, hour.Add(-2*time.Hour), created.ID).Error; err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}

	q := startPlatformAt(t, dataDir)
	q.token = p.token
	var runs runsView
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		upCall(t, q, slug, token, "GET", "/api/automations/"+created.ID+"/runs", nil, &runs)
		if len(runs.Runs) > 0 && runs.Runs[0].Status == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run after the restart: %+v", runs)
		}
	}
	if len(runs.Runs) != 1 || !runs.Runs[0].FireTime.Equal(hour) || runs.Runs[0].SessionID == "" {
		t.Fatalf("runs after 3 hours down = %+v; want one, the fire of %s", runs.Runs, hour)
	}
	var a struct {
		NextFireAt time.Time `json:"next_fire_at"`
	}
	upCall(t, q, slug, token, "GET", "/api/automations/"+created.ID, nil, &a)
	if !a.NextFireAt.Equal(hour.Add(time.Hour)) {
		t.Errorf("next fire %s, want %s", a.NextFireAt, hour.Add(time.Hour))
	}
	if got := metricLine(t, q, "svc_automation_missed_total"); got != "svc_automation_missed_total 2" {
		t.Errorf("missed: %q, want 2", got)
	}
	if got := metricLine(t, q, `svc_automation_runs_total{outcome="done"}`); got != `svc_automation_runs_total{outcome="done"} 1` {
		t.Errorf("runs: %q, want 1 done", got)
	}
}

// metricLine returns the line of p's /metrics that starts with name.
func metricLine(t testing.TB, p *benchPlatform, name string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", p.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	return ""
}

// waitFire waits for the newest run of automation id to end (done or failed) and returns it.
func waitFire(t *testing.T, p *benchPlatform, slug, token, id string) runsView {
	t.Helper()
	var runs runsView
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		runs = runsView{}
		upCall(t, p, slug, token, "GET", "/api/automations/"+id+"/runs", nil, &runs)
		if len(runs.Runs) > 0 && (runs.Runs[0].Status == "done" || runs.Runs[0].Status == "failed") {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run of %s did not end: %+v", id, runs)
		}
	}
}

// TestAutomationRevokedSaverDisablesIt: an automation saved with an ak_ key, and one saved with a
// runtime token of an operator's pk_ token, are disabled with the reason at their next fire once
// that credential is revoked, instead of running; while it holds, the fire runs as the saver.
func TestAutomationRevokedSaverDisablesIt(t *testing.T) {
	p := startPlatform(t)
	agentID, slug, _, admin := upAgent(t, p, "revocable", "hello", "")
	var key struct{ ID, Key string }
	if s := p.call(t, "POST", "/api/agents/"+agentID+"/api-keys", map[string]any{"name": "cron"}, nil, &key); s != 201 || key.Key == "" {
		t.Fatalf("create key = %d %+v", s, key)
	}
	var op struct{ ID, Token string }
	if s := p.call(t, "POST", "/api/tokens", map[string]any{"name": "ops", "kind": "operator", "agentId": agentID}, nil, &op); s != 201 {
		t.Fatalf("create operator token = %d", s)
	}
	var minted struct{ Token string }
	p.call(t, "POST", "/api/agents/"+agentID+"/tokens", map[string]any{}, map[string]string{"Authorization": "Bearer " + op.Token}, &minted)
	record := map[string]any{"name": "daily", "trigger": map[string]any{"every": "24h"}, "action": map[string]any{"message": "hello"}}
	var byKey, byToken struct{ ID string }
	if s := upCall(t, p, slug, key.Key, "POST", "/api/automations", record, &byKey); s != 201 {
		t.Fatalf("create with the key = %d", s)
	}
	if s := upCall(t, p, slug, minted.Token, "POST", "/api/automations", record, &byToken); s != 201 {
		t.Fatalf("create with the minted token = %d", s)
	}
	// While the credentials hold, run now runs.
	for _, id := range []string{byKey.ID, byToken.ID} {
		if s := upCall(t, p, slug, admin, "POST", "/api/automations/"+id+"/run", nil, nil); s != 202 {
			t.Fatalf("run %s = %d", id, s)
		}
		if runs := waitFire(t, p, slug, admin, id); runs.Runs[0].Status != "done" {
			t.Fatalf("run of %s while its saver holds: %+v", id, runs.Runs[0])
		}
	}
	if s := p.call(t, "DELETE", "/api/agents/"+agentID+"/api-keys/"+key.ID, nil, nil, nil); s != 204 {
		t.Fatalf("revoke key = %d", s)
	}
	if s := p.call(t, "DELETE", "/api/tokens/"+op.ID, nil, nil, nil); s != 204 {
		t.Fatalf("revoke token = %d", s)
	}
	for id, why := range map[string]string{byKey.ID: "API key " + key.ID, byToken.ID: "platform token " + op.ID} {
		upCall(t, p, slug, admin, "POST", "/api/automations/"+id+"/run", nil, nil)
		var runs runsView
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			runs = runsView{}
			upCall(t, p, slug, admin, "GET", "/api/automations/"+id+"/runs", nil, &runs)
			if len(runs.Runs) == 2 && runs.Runs[0].Status == "failed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the fire after the revocation of %s: %+v", why, runs)
			}
		}
		if runs.Runs[0].SessionID != "" || !strings.Contains(runs.Runs[0].Error, why) {
			t.Errorf("the fire after the revocation of %s: %+v", why, runs.Runs[0])
		}
		var a struct {
			Enabled        bool
			DisabledReason string `json:"disabled_reason"`
		}
		upCall(t, p, slug, admin, "GET", "/api/automations/"+id, nil, &a)
		if a.Enabled || !strings.Contains(a.DisabledReason, why) || !strings.Contains(a.DisabledReason, "revoked") {
			t.Errorf("after the revocation of %s: %+v", why, a)
		}
	}
	if got := metricLine(t, p, `svc_automation_runs_total{outcome="disabled"}`); got != `svc_automation_runs_total{outcome="disabled"} 2` {
		t.Errorf("disabled runs: %q", got)
	}
}

// TestAutomationTriggersOnUp: on svc up, a tool action run now calls the tool without a model,
// its store write fires a store trigger once for that version, and a signed event fires an event
// trigger whose tool gets the event as params.event.
func TestAutomationTriggersOnUp(t *testing.T) {
	t.Setenv("SUPPORT_DB_URL", filepath.Join(t.TempDir(), "stores.db")) // the fixture's stores
	p := startPlatform(t)
	_, slug, _, token := upAgent(t, p, "desk", "support-desk", "")
	var onWrite, file struct{ ID string }
	if s := upCall(t, p, slug, token, "POST", "/api/automations", map[string]any{
		"name": "on open ticket", "trigger": map[string]any{"store": "tickets", "where": map[string]any{"status": "open"}},
		"action": map[string]any{"message": "a ticket was opened"},
	}, &onWrite); s != 201 {
		t.Fatalf("create store trigger = %d", s)
	}
	if s := upCall(t, p, slug, token, "POST", "/api/automations", map[string]any{
		"name": "file a ticket", "trigger": map[string]any{"every": "24h"},
		"action": map[string]any{"tool": "store__tickets__set", "params": map[string]any{"customer_id": "c1", "number": 7, "subject": "nightly check", "status": "open"}},
	}, &file); s != 201 {
		t.Fatalf("create tool action = %d", s)
	}
	upCall(t, p, slug, token, "POST", "/api/automations/"+file.ID+"/run", nil, nil)
	if runs := waitFire(t, p, slug, token, file.ID); runs.Runs[0].Status != "done" {
		t.Fatalf("tool action run: %+v", runs.Runs[0])
	}
	runs := waitFire(t, p, slug, token, onWrite.ID)
	if len(runs.Runs) != 1 || runs.Runs[0].Status != "done" {
		t.Fatalf("store trigger runs: %+v", runs.Runs)
	}
	var hist struct {
		Title    string
		Messages []struct{ Role, Content string }
	}
	upCall(t, p, slug, token, "GET", "/sessions/history/"+runs.Runs[0].SessionID, nil, &hist)
	if hist.Title != "on open ticket" || len(hist.Messages) == 0 || !strings.Contains(hist.Messages[0].Content, `"key":"c1-7"`) {
		t.Errorf("the store trigger's session: %+v", hist)
	}

	// A signed event runs its automation once, with the event in the message.
	var hook struct{ ID, Secret string }
	if s := upCall(t, p, slug, token, "POST", "/api/automations", map[string]any{
		"name": "paid", "trigger": map[string]any{"event": true}, "action": map[string]any{"message": "an order was paid"},
	}, &hook); s != 201 || hook.Secret == "" {
		t.Fatalf("create event trigger = %d", s)
	}
	body := []byte(`{"order":"o-17"}`)
	for range 2 { // the second is a replay
		req, _ := http.NewRequest("POST", p.url+"/api/automations/"+hook.ID+"/events", bytes.NewReader(body))
		req.Host = slug + ".apps.localhost"
		ts := time.Now().Unix()
		req.Header.Set(automations.TimestampHeader, strconv.FormatInt(ts, 10))
		req.Header.Set(automations.SignatureHeader, automations.Sign(hook.Secret, ts, body))
		req.Header.Set(automations.EventIDHeader, "evt-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 202 && resp.StatusCode != 200 {
			t.Fatalf("event = %d", resp.StatusCode)
		}
	}
	runs = waitFire(t, p, slug, token, hook.ID)
	if len(runs.Runs) != 1 || runs.Runs[0].Status != "done" {
		t.Fatalf("event trigger runs: %+v", runs.Runs)
	}
	hist.Messages = nil
	upCall(t, p, slug, token, "GET", "/sessions/history/"+runs.Runs[0].SessionID, nil, &hist)
	if len(hist.Messages) < 2 || !strings.Contains(hist.Messages[0].Content, `{"order":"o-17"}`) || !strings.HasPrefix(hist.Messages[1].Content, "echo: an order was paid") {
		t.Errorf("the event trigger's session: %+v", hist.Messages)
	}
}

// saverRevoked asks the agent's allow rules again for a saver signed in with the identity
// provider: a user the rules still admit keeps the automation, one they no longer admit (or an
// agent whose sign-in settings were removed) disables it.
func TestAutomationSaverOfASignedInUser(t *testing.T) {
	fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
	addFlags(fs, forUp)
	if err := fs.Set("data-dir", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(fs)
	if err != nil {
		t.Fatal(err)
	}
	p, err := openPlatform(t.Context(), cfg, slog.New(slog.DiscardHandler), true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ag, err := p.stores.Agents.Create(t.Context(), "signed", "signed")
	if err != nil {
		t.Fatal(err)
	}
	settings := func(domains string) {
		t.Helper()
		doc := `{"oidc": {"issuer": "https://idp.example.com", "clientId": "c1"}, "allow": {"domains": [` + domains + `]}}`
		if err := p.stores.Access.Put(t.Context(), ag.ID, json.RawMessage(doc)); err != nil {
			t.Fatal(err)
		}
	}
	a := registry.Automation{AgentID: ag.ID, Saver: registry.AutomationSaver{UserID: "u1", CredentialKind: "browser_session", Email: "ana@acme.test", EmailVerified: true}}
	check := func(want string) {
		t.Helper()
		got, err := p.saverRevoked(t.Context(), a)
		if err != nil || !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("saverRevoked = %q, %v; want %q", got, err, want)
		}
	}
	settings(`"acme.test"`)
	check("")
	settings(`"other.test"`)
	check("allow rules no longer admit its saver u1")
	if err := p.db.Exec(`DELETE FROM agent_access WHERE agent_id = ?`, ag.ID).Error; err != nil {
		t.Fatal(err)
	}
	check("no longer has sign-in settings")
	// Credentials with nothing to revoke: AUTH_TOKEN, no authentication.
	a.Saver = registry.AutomationSaver{CredentialKind: "auth_token"}
	check("")
}
