package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"svc/registry"
)

// TestConsoleFeedbackFilter: the sessions and feedback page filters the feedback by userId and
// screen, from its URL and from its form (which writes them back to the URL).
func TestConsoleFeedbackFilter(t *testing.T) {
	b := newBrowser(t)
	dataDir := t.TempDir()
	p := startPlatformAt(t, dataDir)
	var a struct{ AgentID string }
	p.call(t, "POST", "/api/agents", map[string]any{"name": "Rated"}, nil, &a)
	db := dataDB(t, dataDir)
	now := time.Now().UTC()
	for i, f := range []struct{ user, screen, comment string }{{"u1", "home", "great"}, {"u2", "home", "meh"}, {"u1", "checkout", "slow"}} {
		if _, err := registry.NewFeedback(db).Add(t.Context(), registry.Feedback{AgentID: a.AgentID, Rating: "up", Comment: f.comment,
			Metadata: map[string]string{"userId": f.user, "screen": f.screen}, CreatedAt: now.Add(-time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}

	b.signIn(p.url, p.token)
	page := p.url + "/console/agents/" + a.AgentID + "/sessions"
	comments := `[...[...document.querySelectorAll('h2')].find((e) => e.textContent === 'Feedback').nextElementSibling.querySelectorAll('tbody tr')].map((r) => r.children[2]?.textContent || '').join(',')`
	b.run("open the feedback of u1", 30*time.Second, chromedp.Navigate(page+"?userId=u1"))
	b.wait("u1's feedback", 20*time.Second, comments+` === 'great,slow'`)
	b.set("#f-screen", "checkout")
	b.click(`form.row button[type=submit]`, false)
	b.wait("u1's feedback on checkout", 20*time.Second, comments+` === 'slow'`)
	if q := b.location().Query(); q.Get("userId") != "u1" || q.Get("screen") != "checkout" {
		t.Errorf("the page's URL after filtering = %s, want userId=u1 and screen=checkout", b.location())
	}
	evalAs[string](b, `document.querySelector('#f-user').value = ''`) // chromedp.SetValue refuses ""
	b.set("#f-screen", "home")
	b.click(`form.row button[type=submit]`, false)
	b.wait("the feedback on home", 20*time.Second, comments+` === 'great,meh'`)
	b.checkLoopbackOnly()
}
