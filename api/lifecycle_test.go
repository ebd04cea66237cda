package api_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"svc/agent/agenttest"
	"svc/builder/gittest"
	"svc/migrations/dbtest"
)

// gitAgent makes an agent whose git source is a real repository holding the hello fixture,
// with autoDeploy on, and returns it with the repository and its first commit.
func gitAgent(t *testing.T, h *harness, name, secret string) (string, *gittest.Repo, string) {
	t.Helper()
	id := h.createAgent(name)
	dir := t.TempDir()
	repo, commit := gittest.Init(t, dir, agenttest.Dir(t, "hello"))
	body := map[string]any{"type": "git", "url": "file://" + dir, "defaultBranch": "main"}
	if secret != "" {
		body["webhookSecret"] = secret
	}
	if rec := h.do(request{method: "PUT", path: "/api/agents/" + id + "/source", token: h.admin, body: body}); rec.Code != 200 {
		t.Fatalf("put source = %d %s", rec.Code, rec.Body)
	}
	if rec := h.do(request{method: "PUT", path: "/api/agents/" + id + "/deploy-settings", token: h.admin, body: map[string]any{"autoDeploy": true}}); rec.Code != 200 {
		t.Fatalf("settings = %d %s", rec.Code, rec.Body)
	}
	return id, repo, commit
}

func (h *harness) post(path string, body any) (int, string, map[string]any) {
	h.t.Helper()
	rec := h.do(request{method: "POST", path: path, token: h.admin, body: body})
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	code := ""
	if e, ok := out["error"].(map[string]any); ok {
		code, _ = e["code"].(string)
	}
	return rec.Code, code, out
}

// TestLifecycleErrors covers the rows of spec tables 3.1 and 7 for activate, promote and rollback.
func TestLifecycleErrors(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		id, _, commit := gitAgent(t, h, "Gate", "")

		// Rollback with nothing that qualifies: 422, active unchanged (none).
		if status, code, _ := h.post("/api/deployments/rollback", map[string]any{"agentId": id}); status != 422 || code != "NOTHING_TO_ROLL_BACK" {
			t.Fatalf("rollback with none = %d %s", status, code)
		}
		// A production build without autoPromoteProduction stays inactive until activated.
		prod := h.deploy(id, "production")
		if prod.Status != "ready" || prod.IsActive || prod.Commit != commit {
			t.Fatalf("production build = %+v", prod)
		}
		if _, status := h.active(id, "production"); status != 404 {
			t.Fatalf("active before activation = %d, want 404", status)
		}
		if status, _, out := h.post("/api/deployments/"+prod.DeployID+"/activate", nil); status != 200 || out["isActive"] != true {
			t.Fatalf("activate = %d %v", status, out)
		}
		// Activating a deployment that is not ready: 422 BUILD_NOT_READY.
		st, err := h.stores.Deployments.StartBuild(context.Background(), queuedBuild(id))
		if err != nil {
			t.Fatal(err)
		}
		if status, code, _ := h.post("/api/deployments/"+st.Deployment.ID+"/activate", nil); status != 422 || code != "BUILD_NOT_READY" {
			t.Fatalf("activate queued = %d %s", status, code)
		}
		// A deployment that is not ready has no runtime to report as running.
		if rec := h.do(request{method: "GET", path: "/api/deployments/" + st.Deployment.ID, token: h.admin}); !strings.Contains(rec.Body.String(), `"runtime":"none"`) {
			t.Fatalf("queued deployment = %s, want runtime none", rec.Body)
		}

		// Promote preview → production through the eval gate.
		preview := h.deploy(id, "preview-main")
		if !preview.IsActive {
			t.Fatalf("preview build not active: %+v", preview)
		}
		for _, state := range []string{"pending", "failure", "error"} {
			h.post("/api/agents/"+id+"/commit-statuses", map[string]any{"commit": commit, "context": "svc/evals", "state": state})
			if status, code, _ := h.post("/api/deployments/promote", map[string]any{"agentId": id, "fromEnvironment": "preview-main"}); status != 422 || code != "EVAL_GATE_BLOCKED" {
				t.Fatalf("promote with evals %s = %d %s", state, status, code)
			}
			if act, _ := h.active(id, "production"); act.DeployID != prod.DeployID {
				t.Fatalf("blocked promotion changed production to %s", act.DeployID)
			}
		}
		status, _, out := h.post("/api/deployments/promote", map[string]any{"agentId": id, "fromEnvironment": "preview-main", "force": true})
		if status != 200 || out["environment"] != "production" || out["isActive"] != true || out["deployId"] == preview.DeployID {
			t.Fatalf("forced promote = %d %v", status, out)
		}
		promoted := out["deployId"].(string)
		if act, _ := h.active(id, "preview-main"); act.DeployID != preview.DeployID {
			t.Fatalf("promotion changed the source environment")
		}
		h.post("/api/agents/"+id+"/commit-statuses", map[string]any{"commit": commit, "context": "svc/evals", "state": "success"})
		if status, _, _ := h.post("/api/deployments/promote", map[string]any{"agentId": id, "fromEnvironment": "preview-main"}); status != 200 {
			t.Fatalf("promote with evals success = %d", status)
		}
		// Rollback goes back to the previous live one; an explicit deployId too.
		if status, _, out := h.post("/api/deployments/rollback", map[string]any{"agentId": id}); status != 200 || out["deployId"] != promoted {
			t.Fatalf("rollback = %d %v, want %s", status, out, promoted)
		}
		if status, _, out := h.post("/api/deployments/rollback", map[string]any{"agentId": id, "deployId": prod.DeployID}); status != 200 || out["deployId"] != prod.DeployID {
			t.Fatalf("rollback to %s = %d %v", prod.DeployID, status, out)
		}
		// A missing bundle: promotion fails with 422 BUNDLE_UNAVAILABLE, destination unchanged.
		if err := h.objects.Delete(context.Background(), bundleKey(t, h, preview.DeployID)); err != nil {
			t.Fatal(err)
		}
		if status, code, _ := h.post("/api/deployments/promote", map[string]any{"agentId": id, "fromEnvironment": "preview-main"}); status != 422 || code != "BUNDLE_UNAVAILABLE" {
			t.Fatalf("promote without bundle = %d %s", status, code)
		}
		if act, _ := h.active(id, "production"); act.DeployID != prod.DeployID {
			t.Fatalf("failed promotion changed production")
		}
		// Every transition is recorded.
		rec := h.do(request{method: "GET", path: "/api/agents/" + id + "/activations?environment=production", token: h.admin})
		var acts []map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &acts); err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, a := range acts {
			actions = append(actions, a["action"].(string))
		}
		if got := strings.Join(actions, ","); got != "rollback,rollback,promote,promote,activate" {
			t.Fatalf("activations = %s", got)
		}
		// Bad bodies name the field.
		if status, code, out := h.post("/api/deployments/promote", map[string]any{"agentId": id}); status != 400 || code != "INVALID_REQUEST" || !strings.Contains(fmt.Sprint(out), "fromEnvironment") {
			t.Fatalf("promote without fromEnvironment = %d %s %v", status, code, out)
		}
		if status, _, _ := h.post("/api/deployments/redeploy", map[string]any{"agentId": id, "branch": "no-such-branch"}); status != 400 {
			t.Fatalf("redeploy of a missing branch = %d", status)
		}
	})
}

// TestWebhookPush drives a signed GitHub-shaped push through the route to an active preview.
func TestWebhookPush(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		const secret = "s3cret-webhook"
		id, repo, _ := gitAgent(t, h, "Hooked", secret)
		repo.Branch(t, "feature/x")
		commit := repo.Commit(t, "", "feature work")
		payload, _ := json.Marshal(map[string]any{
			"ref": "refs/heads/feature/x", "before": strings.Repeat("0", 40), "after": commit, "deleted": false, "created": true,
			"repository": map[string]any{"full_name": "acme/hooked", "clone_url": "file://" + repo.Dir, "ssh_url": "", "html_url": ""},
			"pusher":     map[string]any{"name": "dev"}, "head_commit": map[string]any{"id": commit, "message": "feature work"},
		})
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(payload)
		sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		send := func(signature string) (int, map[string]any) {
			hdr := map[string]string{"X-GitHub-Event": "push"}
			if signature != "" {
				hdr["X-Hub-Signature-256"] = signature
			}
			rec := h.do(request{method: "POST", path: "/webhooks/github?agent=" + id, body: payload, header: hdr})
			var out map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &out)
			return rec.Code, out
		}
		for _, bad := range []string{"", "sha256=" + strings.Repeat("0", 64)} {
			if status, _ := send(bad); status != http.StatusUnauthorized {
				t.Fatalf("push with signature %q = %d, want 401", bad, status)
			}
		}
		if rec := h.do(request{method: "GET", path: "/api/agents/" + id + "/deployments", token: h.admin}); strings.Contains(rec.Body.String(), "deployId") {
			t.Fatalf("a rejected push recorded something: %s", rec.Body)
		}
		status, out := send(sig)
		if status != http.StatusAccepted || out["action"] != "build" || out["environment"] != "preview-feature/x" {
			t.Fatalf("signed push = %d %v", status, out)
		}
		d := h.waitDeployment(out["deployId"].(string))
		if d.Status != "ready" || !d.IsActive || d.Commit != commit {
			t.Fatalf("deployment = %+v", d)
		}
		if status, out := send(sig); status != http.StatusAccepted || out["action"] != "skipped" || out["reason"] != "already-built" {
			t.Fatalf("same push again = %d %v", status, out)
		}
		logs := h.do(request{method: "GET", path: "/api/builds/" + d.BuildID + "/logs?follow=1", token: h.admin})
		if !strings.Contains(logs.Body.String(), "[validate]") || !strings.Contains(logs.Body.String(), "ready and active") {
			t.Fatalf("build log:\n%s", logs.Body)
		}
	})
}

func bundleKey(t *testing.T, h *harness, deployID string) string {
	t.Helper()
	d, err := h.stores.Deployments.Get(context.Background(), deployID)
	if err != nil {
		t.Fatal(err)
	}
	return d.BundleKey
}

// TestCorruptBundleIsNeverActivated: a bundle damaged in the object store after its build makes
// activate, rollback (explicit and automatic) and promote answer 422 BUNDLE_UNAVAILABLE naming
// the deployment, and the environment keeps what it serves.
func TestCorruptBundleIsNeverActivated(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		id, repo, _ := gitAgent(t, h, "Corrupt", "")
		first := h.deploy(id, "production")
		repo.Commit(t, agenttest.Dir(t, "support-desk"), "second") // other content: another bundle key
		second := h.deploy(id, "production")
		if first.Status != "ready" || second.Status != "ready" || bundleKey(t, h, first.DeployID) == bundleKey(t, h, second.DeployID) {
			t.Fatalf("builds = %+v, %+v: want two ready deployments with their own bundles", first, second)
		}
		for _, d := range []deployment{first, second} {
			if status, _, out := h.post("/api/deployments/"+d.DeployID+"/activate", nil); status != 200 {
				t.Fatalf("activate %s = %d %v", d.DeployID, status, out)
			}
		}
		corrupt := func(deployID string) {
			key := bundleKey(t, h, deployID)
			garbage := bytes.Repeat([]byte("x"), 64)
			if err := h.objects.Put(ctx, key, bytes.NewReader(garbage), int64(len(garbage))); err != nil {
				t.Fatal(err)
			}
		}
		refused := func(what string, status int, code string, out map[string]any) {
			t.Helper()
			if status != 422 || code != "BUNDLE_UNAVAILABLE" || !strings.Contains(fmt.Sprint(out), first.DeployID) {
				t.Fatalf("%s = %d %s %v, want 422 BUNDLE_UNAVAILABLE naming %s", what, status, code, out, first.DeployID)
			}
			if act, _ := h.active(id, "production"); act.DeployID != second.DeployID {
				t.Fatalf("after a refused %s production serves %s, want %s", what, act.DeployID, second.DeployID)
			}
		}
		corrupt(first.DeployID)
		status, code, out := h.post("/api/deployments/"+first.DeployID+"/activate", nil)
		refused("activate", status, code, out)
		status, code, out = h.post("/api/deployments/rollback", map[string]any{"agentId": id})
		refused("automatic rollback", status, code, out)
		status, code, out = h.post("/api/deployments/rollback", map[string]any{"agentId": id, "deployId": first.DeployID})
		refused("rollback to it", status, code, out)

		// Promotion of a corrupt bundle: refused, production unchanged.
		preview := h.deploy(id, "preview-main")
		corrupt(preview.DeployID)
		status, code, _ = h.post("/api/deployments/promote", map[string]any{"agentId": id, "fromEnvironment": "preview-main"})
		if status != 422 || code != "BUNDLE_UNAVAILABLE" {
			t.Fatalf("promote a corrupt bundle = %d %s", status, code)
		}
		if act, _ := h.active(id, "production"); act.DeployID != second.DeployID {
			t.Fatalf("a refused promotion changed production to %s", act.DeployID)
		}
	})
}

// TestWebhookOtherEvents: an event that is not a push, sent by a hook subscribed to every event,
// is 202 skipped (not 404), records nothing, and names the event.
func TestWebhookOtherEvents(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	body := []byte(`{"action": "opened", "issue": {"number": 1}, "repository": {"full_name": "acme/x", "clone_url": "https://github.com/acme/x.git"}}`)
	rec := h.do(request{method: "POST", path: "/webhooks/github", body: body, header: map[string]string{"X-GitHub-Event": "issues"}})
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	if rec.Code != http.StatusAccepted || out["action"] != "skipped" || !strings.Contains(fmt.Sprint(out["reason"]), "issues") {
		t.Fatalf("issues event = %d %s", rec.Code, rec.Body)
	}
}
