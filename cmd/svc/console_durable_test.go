package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// flowTree is an agent with a durable tool that waits for a typed answer and returns it.
var flowTree = map[string]string{
	"svc.json":                  `{"name": "flows", "version": "1"}`,
	"agents/default/AGENT.md":   "You run flows.",
	"agents/default/agent.json": `{"name": "default", "tools": ["ship"]}`,
	"svc/tools/ship/tool.json":  `{"name": "ship", "execution": "durable", "parameters": {"type": "object", "properties": {}}}`,
	"svc/tools/ship/handler.ts": "export default async function (p: any, ctx: any) {\n  const a = await ctx.requestInput({question: \"Which warehouse?\"});\n  return { shipped_from: a.value };\n}\n",
}

// TestConsoleDurableForm: a durable tool's pause shows a form in the playground; the answer
// typed there resumes the run, which completes with it.
func TestConsoleDurableForm(t *testing.T) {
	b := newBrowser(t)
	dataDir := t.TempDir()
	p := startPlatformAt(t, dataDir)
	agentID, deployID := deployTree(t, p, "Flows", flowTree)
	b.signIn(p.url, p.token)
	b.run("open the playground", 30*time.Second, chromedp.Navigate(p.url+"/console/agents/"+agentID+"/playground?deploy="+deployID),
		chromedp.WaitVisible(chromedp.CSS("#pg-message")))
	b.set("#pg-message", `/tool ship {}`)
	b.click("#pg-send", false)
	b.wait("the durable form", 60*time.Second, `(document.querySelector('form.approval.durable strong')?.textContent || '').includes('Which warehouse?')`)
	b.set("form.approval.durable input", "Oslo")
	b.click(`form.approval.durable button[type="submit"]`, false)
	b.wait("the answer accepted", 30*time.Second, `(document.querySelector('form.approval.durable .ok')?.textContent || '') === 'Answered.'`)

	db := dataDB(t, dataDir)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var run struct{ Status, Result string }
		if err := db.Raw(`SELECT status, COALESCE(result, '') AS result FROM durable_runs WHERE agent_id = ? AND tool_name = 'ship'`, agentID).Scan(&run).Error; err != nil {
			t.Fatal(err)
		}
		if run.Status == "completed" {
			if !strings.Contains(run.Result, `"shipped_from":"Oslo"`) {
				t.Errorf("the run completed with %s, want the answer Oslo", run.Result)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the durable run is %q after the answer", run.Status)
		}
	}
	b.checkLoopbackOnly()
}
