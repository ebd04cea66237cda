package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleSettingsSave: the deploy settings form saves what it shows, the API reads it back,
// and the page shows it again after a reload.
func TestConsoleSettingsSave(t *testing.T) {
	b := newBrowser(t)
	p := startPlatform(t)
	var a struct{ AgentID string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": "Tuned"}, nil, &a)
	b.signIn(p.url, p.token)
	page := p.url + "/console/agents/" + a.AgentID + "/settings"
	b.run("open the settings", 30*time.Second, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#set-branch")))
	b.set("#set-branch", "release")
	b.click("#set-promote", false)
	b.click(`form:has(#set-branch) button[type=submit]`, false)
	b.wait("the settings saved", 20*time.Second, `[...document.querySelectorAll('section')].some((s) => s.contains(document.querySelector('#set-branch')) && s.textContent.includes('Saved.'))`)
	var got struct {
		Settings struct {
			ProductionBranch      string
			AutoDeploy            bool
			AutoPromoteProduction bool
		}
	}
	p.call(t, "GET", "/api/agents/"+a.AgentID, nil, nil, &got)
	if got.Settings.ProductionBranch != "release" || !got.Settings.AutoPromoteProduction {
		t.Errorf("the agent's settings after the save = %+v, want production branch release and promote on", got.Settings)
	}
	b.run("reload the settings", 30*time.Second, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#set-branch")))
	if !evalAs[bool](b, `document.querySelector('#set-branch').value === 'release' && document.querySelector('#set-promote').checked`) {
		t.Error("the settings page does not show the saved settings after a reload")
	}
	b.checkLoopbackOnly()
}
