package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"svc/auth"
	"svc/registry"
)

// TestConsoleDeploymentsPaged: an agent's page shows its deployments a server page (20) at a
// time, Older and Newer follow the cursors, the environments table shows the active deployment
// even when it is not on the page; the page makes its calls once each and does not load the
// playground's module.
func TestConsoleDeploymentsPaged(t *testing.T) {
	b := newBrowser(t)
	dataDir := t.TempDir()
	p := startPlatformAt(t, dataDir)
	var a struct{ AgentID string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": "Paged"}, nil, &a)
	db := dataDB(t, dataDir)
	now := time.Now().UTC()
	var oldest string
	for j := range 45 {
		created := now.Add(-time.Duration(j) * time.Minute)
		d := registry.Deployment{ID: auth.NewID("d"), AgentID: a.AgentID, BuildID: auth.NewID("b"), Environment: "staging",
			CommitSHA: fmt.Sprintf("%040x", j), Status: registry.StatusReady, CreatedAt: created, ReadyAt: &created}
		if j == 44 { // the oldest serves production: on no page but the last
			d.Environment, d.IsActive, d.ActivatedAt = "production", true, &created
			oldest = d.ID
		}
		if err := db.Create(&d).Error; err != nil {
			t.Fatal(err)
		}
	}
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}

	b.signIn(p.url, p.token)
	b.mu.Lock()
	from := len(b.requests)
	b.mu.Unlock()
	b.run("open the agent", 30*time.Second, chromedp.Navigate(p.url+"/console/agents/"+a.AgentID))
	rows := `document.querySelectorAll('#deployments tbody tr').length`
	b.wait("the first page", 20*time.Second, rows+` === 20`)
	// The environments table is filled when its own call answers, after the page is drawn.
	b.wait("the environments table", 20*time.Second, `document.querySelector('tr[data-env="production"]') !== null`)
	if got := evalAs[string](b, `document.querySelector('tr[data-env="production"]')?.textContent || ''`); !strings.Contains(got, oldest) {
		t.Errorf("the environments table's production row = %q, want the active %s", got, oldest)
	}
	b.mu.Lock()
	calls := map[string]int{}
	for _, r := range b.requests[from:] {
		u, err := url.Parse(r)
		if err != nil {
			continue
		}
		if strings.HasPrefix(u.Path, "/api/") {
			calls[u.RequestURI()]++
		}
		if strings.HasSuffix(u.Path, "/playground.js") {
			t.Errorf("the agent's page loaded the playground's module: %s", r)
		}
	}
	b.mu.Unlock()
	base := "/api/agents/" + a.AgentID
	want := []string{"/api/tokens/self", base, base + "/deployments?active=true&limit=500", base + "/deployments?limit=20"}
	for _, w := range want {
		if calls[w] != 1 {
			t.Errorf("the page called %s %d times, want once (all calls: %v)", w, calls[w], calls)
		}
	}
	if len(calls) != len(want) {
		t.Errorf("the page made the calls %v, want %v", calls, want)
	}

	label := `document.querySelector('#deployments-page').textContent`
	b.click("#older", false)
	b.wait("the second page", 20*time.Second, label+` === 'page 2' && `+rows+` === 20`)
	b.click("#older", false)
	b.wait("the last page", 20*time.Second, label+` === 'page 3 (the last)' && `+rows+` === 5`)
	if !evalAs[bool](b, `document.querySelector('#older').disabled && document.querySelector('#deployments').textContent.includes('`+oldest+`')`) {
		t.Error("the last page does not end with the oldest deployment, or Older is enabled")
	}
	b.click("#newer", false)
	b.wait("the second page again", 20*time.Second, label+` === 'page 2'`)
	b.click("#newer", false)
	b.wait("the first page again", 20*time.Second, label+` === 'page 1' && document.querySelector('#newer').disabled && `+rows+` === 20`)
	b.checkLoopbackOnly()
}
