package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleNarrowAndKeyboard: on a 360-pixel-wide screen no page scrolls sideways (tables
// scroll inside their own box), and signing in works with the keyboard alone (Enter submits).
func TestConsoleNarrowAndKeyboard(t *testing.T) {
	b := newBrowser(t)
	p := startPlatform(t)
	agentID, deployID := deployTree(t, p, "Narrow", calcTree)
	b.run("narrow the screen", 20*time.Second, chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	b.run("open the console", 30*time.Second, chromedp.Navigate(p.url+"/console/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	b.run("type the token and Enter", 20*time.Second, chromedp.SendKeys(chromedp.CSS("#token"), p.token+"\r"))
	b.wait("the agents page", 20*time.Second, `document.querySelector('#agents') !== null`)
	for _, page := range []string{"/console/", "/console/agents/" + agentID, "/console/agents/" + agentID + "/settings",
		"/console/deployments/" + deployID, "/console/agents/" + agentID + "/playground", "/console/agents/" + agentID + "/sessions"} {
		b.run("open "+page, 30*time.Second, chromedp.Navigate(p.url+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		b.wait(page+" drawn", 20*time.Second, `performance.getEntriesByName('console:rendered').length > 0`)
		if w := evalAs[int](b, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
			b.screenshot()
			t.Errorf("%s is %d pixels wider than a 360-pixel screen", page, w)
		}
	}
	b.checkLoopbackOnly()
}
