package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"svc/agent/agenttest"
	"svc/migrations/dbtest"
)

// chromiumPath is Debian's chromium, which scripts/services.sh installs.
func chromiumPath() string {
	if p := os.Getenv("SVC_TEST_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// browser is one headless Chromium tab for a test, with every request the page made.
type browser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	requests []string
	console  []string // console lines, exceptions and failed loads of the page
}

// newBrowser starts chromium on a fresh profile (no network beyond loopback is used or
// needed); a missing chromium fails under SVC_TEST_REQUIRE_SERVICES (or CI) and skips
// otherwise. The browser is closed, and its process waited for, when t ends; a failed test
// leaves a screenshot whose path is logged.
func newBrowser(t testing.TB) *browser {
	t.Helper()
	if _, err := exec.LookPath(chromiumPath()); err != nil {
		dbtest.Missing(t, "chromium (apt-get install -y chromium)", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot()
			b.mu.Lock()
			t.Logf("the page's console:\n%s", strings.Join(b.console, "\n"))
			b.mu.Unlock()
		}
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
	})
	// The first call starts the browser, on ctx itself: a deadline on it would end the
	// browser with it. Every later action has its own deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, e.Request.URL)
		case *runtime.EventExceptionThrown:
			b.console = append(b.console, "exception: "+e.ExceptionDetails.Text+" "+exceptionText(e.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			line := string(e.Type) + ":"
			for _, a := range e.Args {
				line += " " + a.Description + string(a.Value)
			}
			b.console = append(b.console, line)
		case *network.EventLoadingFailed:
			b.console = append(b.console, "request failed: "+e.ErrorText)
		}
	}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Call(cctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("enable the network domain: %v", err)
	}
	if _, err := chromedp.Call(cctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the runtime domain: %v", err)
	}
	return b
}

// screenshot saves the page as a PNG outside the test's temporary folders (which are removed)
// and logs where.
func (b *browser) screenshot() {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot: %v", err)
		return
	}
	dir := filepath.Join(os.TempDir(), "svc-console-screenshots")
	_ = os.MkdirAll(dir, 0o755)
	name := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(b.t.Name())+".png")
	if err := os.WriteFile(name, buf, 0o644); err != nil {
		b.t.Logf("screenshot: %v", err)
		return
	}
	b.t.Logf("screenshot of the failed page: %s", name)
}

// run does actions within limit, failing the test with what it was doing.
func (b *browser) run(what string, limit time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// wait polls the JavaScript expression until it is truthy, within limit.
func (b *browser) wait(what string, limit time.Duration, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit+time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(limit))); err != nil {
		b.t.Fatalf("wait for %s (%s): %v", what, expr, err)
	}
}

// waitFrame is wait checking at every animation frame rather than every 50 ms, for timings.
func (b *browser) waitFrame(what string, limit time.Duration, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit+time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(limit))); err != nil {
		b.t.Fatalf("wait for %s (%s): %v", what, expr, err)
	}
}

// evalAs evaluates expr in b's page.
func evalAs[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// location is the page's URL.
func (b *browser) location() *url.URL {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.t.Fatalf("location: %v", err)
	}
	u, err := url.Parse(loc)
	if err != nil {
		b.t.Fatal(err)
	}
	return u
}

// click clicks sel and, when confirm, the confirmation dialog's button.
func (b *browser) click(sel string, confirm bool) {
	b.t.Helper()
	b.run("click "+sel, 20*time.Second, chromedp.WaitEnabled(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
	if confirm {
		b.run("confirm "+sel, 20*time.Second, chromedp.WaitVisible(chromedp.CSS("#confirm-ok")), chromedp.Click(chromedp.CSS("#confirm-ok")))
	}
}

func (b *browser) set(sel, value string) {
	b.t.Helper()
	b.run("set "+sel, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.SetValue(chromedp.CSS(sel), value))
}

// signIn opens the console and signs in with token.
func (b *browser) signIn(base, token string) {
	b.t.Helper()
	b.run("open the console", 30*time.Second, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	b.set("#token", token)
	b.click("#signin button[type=submit]", false)
	b.wait("the agents page", 20*time.Second, `document.querySelector('#agents') !== null`)
}

// checkLoopbackOnly fails for any request the page made to a host that is not loopback.
func (b *browser) checkLoopbackOnly() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.requests) == 0 {
		b.t.Error("no request was recorded")
	}
	for _, r := range b.requests {
		u, err := url.Parse(r)
		if err != nil {
			b.t.Errorf("request %q: %v", r, err)
			continue
		}
		if u.Scheme == "data" || u.Scheme == "blob" {
			continue
		}
		host := u.Hostname()
		if host != "127.0.0.1" && host != "localhost" && !strings.HasSuffix(host, ".localhost") {
			b.t.Errorf("the page loaded an external URL: %s", r)
		}
	}
}

// TestConsoleRelease drives the console through a release in a real Chromium against svc up:
// sign in, create an agent, upload the hello example, deploy it and watch its log to the end,
// activate, deploy staging, promote it to production, roll production back; the page loads no
// external URL.
func TestConsoleRelease(t *testing.T) {
	b := newBrowser(t)
	p := startPlatform(t)
	b.signIn(p.url, p.token)

	b.set("#new-agent-name", "Browser Hello")
	b.click("#create-agent", false)
	b.wait("the agent page", 20*time.Second, `document.querySelector('#environments') !== null`)
	agentID := strings.TrimPrefix(b.location().Path, "/console/agents/")

	files, err := json.Marshal(agenttest.Files(t, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	b.set("#upload-files", string(files))
	b.click("#upload", false)
	b.wait("the upload", 30*time.Second, `document.querySelector('#upload-result') !== null`)

	deploy := func(env string) string {
		b.set("#deploy-env", env)
		b.click("#deploy", true)
		b.wait("the end of the build log", 2*time.Minute, `document.querySelector('#log-state[data-done]') !== null`)
		state := evalAs[string](b, `document.querySelector('#log-state').dataset.done`)
		log := evalAs[string](b, `document.querySelector('#build-log').textContent`)
		if state != "succeeded" || !strings.Contains(log, "[verify]") {
			t.Fatalf("build of %s: %s, log:\n%s", env, state, log)
		}
		steps := evalAs[int](b, `document.querySelectorAll('#build-steps tbody tr').length`)
		if steps == 0 {
			t.Error("the build page shows no steps")
		}
		return b.location().Query().Get("deploy")
	}
	first := deploy("production")
	b.run("back to the agent", 20*time.Second, chromedp.Navigate(p.url+"/console/agents/"+agentID), chromedp.WaitVisible(chromedp.CSS("#environments")))
	b.click(fmt.Sprintf(`[data-activate="%s"]`, first), true)
	b.wait("production serves the first deployment", 30*time.Second,
		fmt.Sprintf(`(document.querySelector('#action-result')?.textContent || '').includes('production serves %s')`, first))

	b.run("back to the agent", 20*time.Second, chromedp.Navigate(p.url+"/console/agents/"+agentID), chromedp.WaitVisible(chromedp.CSS("#environments")))
	second := deploy("staging")
	b.run("back to the agent", 20*time.Second, chromedp.Navigate(p.url+"/console/agents/"+agentID), chromedp.WaitVisible(chromedp.CSS(`tr[data-env="staging"]`)))
	b.set("#promote-from", "staging")
	b.set("#promote-to", "production")
	b.click("#promote", true)
	b.wait("the promotion's answer", 60*time.Second, `(document.querySelector('#action-result')?.textContent || '').includes('production serves') || document.querySelector('#force-promote') !== null`)
	forced := evalAs[bool](b, `document.querySelector('#force-promote') !== null`)
	if forced { // the eval gate held it: an operator may force, as the page offers
		b.click("#force-promote", true)
		b.wait("the forced promotion", 60*time.Second, `(document.querySelector('#action-result')?.textContent || '').includes('production serves')`)
	}
	var active struct{ DeployID, PromotedFrom string }
	p.call(t, "GET", "/api/agents/"+agentID+"/active-deployment?environment=production", nil, nil, &active)
	if active.DeployID == first || active.PromotedFrom != second {
		t.Fatalf("after promote production serves %+v, want a promotion of %s", active, second)
	}

	b.run("reload the agent", 20*time.Second, chromedp.Navigate(p.url+"/console/agents/"+agentID), chromedp.WaitVisible(chromedp.CSS(`[data-rollback="production"]`)))
	b.click(`[data-rollback="production"]`, true)
	b.wait("the rollback", 60*time.Second, fmt.Sprintf(`(document.querySelector('#action-result')?.textContent || '').includes('production serves %s')`, first))
	p.call(t, "GET", "/api/agents/"+agentID+"/active-deployment?environment=production", nil, nil, &active)
	if active.DeployID != first {
		t.Fatalf("after rollback production serves %s, want %s", active.DeployID, first)
	}
	b.checkLoopbackOnly()
}

// calcTree is an agent whose tools show a card, a nested card (double calls add), an approval
// (wipe requires confirmation) and a question (ask_user); the echo model calls them on
// "/tool NAME {json}".
var calcTree = map[string]string{
	"svc.json":                    `{"name": "calc", "version": "1"}`,
	"agents/default/AGENT.md":     "You calculate.",
	"agents/default/agent.json":   `{"name": "default", "tools": ["add", "wipe", "double", "ask_user"]}`,
	"svc/tools/add/tool.json":     `{"name": "add", "description": "Adds.", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}`,
	"svc/tools/add/handler.ts":    "export default async function (p: {a: number, b: number}) {\n  return { sum: p.a + p.b };\n}\n",
	"svc/tools/wipe/tool.json":    `{"name": "wipe", "parameters": {"type": "object"}, "requiresConfirmation": true}`,
	"svc/tools/wipe/handler.ts":   "export default function () {\n  return \"wiped\";\n}\n",
	"svc/tools/double/tool.json":  `{"name": "double", "parameters": {"type": "object"}, "uses": {"tools": ["add"]}}`,
	"svc/tools/double/handler.ts": "export default async function (p: any, ctx: any) {\n  const r = await ctx.callTool(\"add\", { a: p.n, b: p.n });\n  return { double: r.sum };\n}\n",
}

// deployTree creates an agent of files on p through the API and makes its build serve
// production; it returns the agent's id and the deployment.
func deployTree(t *testing.T, p *benchPlatform, name string, files map[string]string) (string, string) {
	t.Helper()
	var a struct{ AgentID string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": name}, nil, &a)
	p.call(t, "POST", "/api/agents/"+a.AgentID+"/source-versions", map[string]any{"files": files}, nil, nil)
	var rd struct{ DeployID string }
	p.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": a.AgentID}, nil, &rd)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var d struct{ Status, Error string }
		p.call(t, "GET", "/api/deployments/"+rd.DeployID, nil, nil, &d)
		if d.Status == "ready" {
			break
		}
		if d.Status == "failed" || time.Now().After(deadline) {
			t.Fatalf("deployment %s: %s %s", rd.DeployID, d.Status, d.Error)
		}
	}
	p.call(t, "POST", "/api/deployments/"+rd.DeployID+"/activate", nil, nil, nil)
	return a.AgentID, rd.DeployID
}

// TestConsolePlayground chats in the playground with a pinned deployment through a tool call,
// a composite tool's nested call and an approval answered with the page's button.
func TestConsolePlayground(t *testing.T) {
	b := newBrowser(t)
	p := startPlatform(t)
	agentID, deployID := deployTree(t, p, "Calc", calcTree)
	b.signIn(p.url, p.token)
	b.run("open the playground", 30*time.Second, chromedp.Navigate(p.url+"/console/agents/"+agentID+"/playground?deploy="+deployID),
		chromedp.WaitVisible(chromedp.CSS("#pg-message")))
	target := evalAs[string](b, `document.querySelector('#pg-target').value`)
	if !strings.Contains(target, deployID+"--") {
		t.Errorf("the playground targets %s, want the pinned URL of %s", target, deployID)
	}
	send := func(msg string) {
		b.set("#pg-message", msg)
		b.click("#pg-send", false)
	}
	// The request's metadata is editable; the sessions page filters on it below.
	evalAs[bool](b, `document.querySelector('#pg-metadata').value = '{"userId": "u-browser", "screen": "calc"}'; true`)
	send(`/tool add {"a": 2, "b": 3}`)
	b.wait("the add card's result", 60*time.Second, `document.querySelector('.tool[data-tool="add"][data-status="success"] .tool-result')?.textContent.includes('5')`)
	b.wait("done", 30*time.Second, `document.querySelectorAll('.done').length === 1`)

	send(`/tool double {"n": 4}`)
	b.wait("the double card", 60*time.Second, `document.querySelector('.tool[data-tool="double"][data-status="success"] .tool-result')?.textContent.includes('8')`)
	// The composite's inner call streams with parent_tool_id: a card inside the double card.
	b.wait("the nested add card", 30*time.Second, `document.querySelector('.tool[data-tool="double"] .children .tool[data-tool="add"][data-status="success"]') !== null`)
	b.wait("done", 30*time.Second, `document.querySelectorAll('.done').length === 2`)

	send(`/tool wipe {}`)
	b.wait("the approval", 60*time.Second, `document.querySelector('.approval [data-approve="yes"]') !== null`)
	b.click(`.approval [data-approve="yes"]`, false)
	b.wait("the approved call's result", 60*time.Second, `document.querySelector('.tool[data-tool="wipe"][data-status="success"] .tool-result')?.textContent.includes('wiped')`)
	b.wait("done", 30*time.Second, `document.querySelectorAll('.done').length === 3`)

	// ask_choice: the options are buttons; pressing one sends its value as the next message.
	send(`/tool ask_user {"question": "Which plan?", "options": [{"value": "pro", "label": "Pro"}, {"value": "team", "label": "Team"}]}`)
	b.wait("the question's buttons", 60*time.Second, `document.querySelector('[data-choice="pro"]') !== null`)
	b.wait("done", 30*time.Second, `document.querySelectorAll('.done').length === 4`)
	b.click(`[data-choice="pro"]`, false)
	b.wait("the chosen value sent", 60*time.Second, `[...document.querySelectorAll('.msg.user')].at(-1)?.textContent === 'pro' && document.querySelectorAll('.done').length === 5`)
	// Stop, while a call waits for its approval: POST /chat/sessions/{id}/stop ends the turn on
	// the runtime, whose stream ends with done user_abort.
	send(`/tool wipe {}`)
	b.wait("the second approval", 60*time.Second, `document.querySelectorAll('.approval [data-approve="yes"]').length === 2`)
	b.click("#pg-stop", false)
	b.wait("the turn stopped", 60*time.Second, `!document.querySelector('#pg-send').disabled && document.querySelector('#pg-stop').disabled`)
	b.wait("done user_abort", 30*time.Second, `document.querySelector('.done[data-reason="user_abort"]') !== null`)
	b.wait("the session in the history", 30*time.Second, `document.querySelectorAll('#pg-history button').length >= 1`)
	sessionID := evalAs[string](b, `document.querySelector('#pg-session').value`)

	// Sessions filtered by userId and screen: this one, then none for another user.
	b.run("open the sessions", 30*time.Second, chromedp.Navigate(p.url+"/console/agents/"+agentID+"/sessions?userId=u-browser&screen=calc"))
	b.wait("the session listed", 30*time.Second, fmt.Sprintf(`document.querySelector('main').textContent.includes(%q)`, sessionID))
	b.set("#f-user", "someone-else")
	b.click(`form button[type=submit]`, false)
	b.wait("no session for another user", 30*time.Second, fmt.Sprintf(`!document.querySelector('main').textContent.includes(%q) && document.querySelector('main').textContent.includes('None.')`, sessionID))

	// Automations are read on the agent's host with a token the console mints.
	b.run("open the automations", 30*time.Second, chromedp.Navigate(p.url+"/console/agents/"+agentID+"/automations"))
	b.wait("the automations table", 30*time.Second, `document.querySelector('#automations') !== null`)
	b.checkLoopbackOnly()
}

// TestConsoleObserver: an observer token sees every mutation button disabled, and the API
// refuses the mutation anyway.
func TestConsoleObserver(t *testing.T) {
	b := newBrowser(t)
	p := startPlatform(t)
	agentID, deployID := deployTree(t, p, "Watched", agenttest.Files(t, "hello"))
	var tok struct{ Token string }
	p.call(t, "POST", "/api/tokens", map[string]any{"name": "watcher", "kind": "observer"}, nil, &tok)
	b.signIn(p.url, tok.Token)
	who := evalAs[string](b, `document.querySelector('#who').dataset.kind`)
	if who != "observer" {
		t.Errorf("the page says the token is %q, want observer", who)
	}
	for _, page := range []string{"/console/", "/console/agents/" + agentID, "/console/agents/" + agentID + "/settings", "/console/deployments/" + deployID} {
		b.run("open "+page, 30*time.Second, chromedp.Navigate(p.url+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		b.wait("the page's buttons", 20*time.Second, `document.querySelectorAll('button[data-need]').length > 0`)
		enabled := evalAs[[]string](b, `[...document.querySelectorAll('button[data-need]')].filter((b) => !b.disabled).map((b) => b.textContent)`)
		if len(enabled) > 0 {
			t.Errorf("%s: an observer sees enabled mutation buttons %q", page, enabled)
		}
	}
	// The API refuses it all the same.
	code := p.call(t, "POST", "/api/deployments/redeploy", map[string]any{"agentId": agentID}, map[string]string{"Authorization": "Bearer " + tok.Token}, nil)
	if code != 403 {
		t.Errorf("an observer's redeploy = %d, want 403", code)
	}
	b.checkLoopbackOnly()
}

// exceptionText is what the page's uncaught exception says.
func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil || d.Exception == nil {
		return ""
	}
	return d.Exception.Description
}

// TestConsoleEvalGate: a promotion the failed evals block shows EVAL_GATE_BLOCKED with the
// evals' results, and the operator's Force promote (confirmed) promotes.
func TestConsoleEvalGate(t *testing.T) {
	b := newBrowser(t)
	p := startPlatform(t)
	model := newFakeEvalModel(t, false, false)
	a := newEvalsAgent(t, p, "console-gate", model, false)
	c1 := a.commit(t, "refunds, first try", nil)
	d1 := p.push(t, a.id, a.dir, evalsBranch, c1)
	if run := waitEvalRun(t, p, d1); run.State != "failure" {
		t.Fatalf("eval run: %+v", run)
	}
	b.signIn(p.url, p.token)
	b.run("open the agent", 30*time.Second, chromedp.Navigate(p.url+"/console/agents/"+a.id),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-env=%q]`, evalsEnv))))
	b.set("#promote-from", evalsEnv)
	b.set("#promote-to", "production")
	b.click("#promote", true)
	b.wait("the refusal with the evals", 60*time.Second, `document.querySelector('#force-promote') !== null && document.querySelector('#evals') !== null`)
	text := evalAs[string](b, `document.querySelector('#action-result').textContent`)
	for _, want := range []string{"EVAL_GATE_BLOCKED", "no-monthly-refund", "Should say that monthly plans are not refundable"} {
		if !strings.Contains(text, want) {
			t.Errorf("the refusal does not show %q:\n%s", want, text)
		}
	}
	b.click("#force-promote", true)
	b.wait("the forced promotion", 60*time.Second, `(document.querySelector('#action-result')?.textContent || '').includes('production serves')`)
	var active struct{ Commit string }
	p.call(t, "GET", "/api/agents/"+a.id+"/active-deployment?environment=production", nil, nil, &active)
	if active.Commit != c1 {
		t.Errorf("production serves commit %q, want %s", active.Commit, c1)
	}
	b.checkLoopbackOnly()
}
