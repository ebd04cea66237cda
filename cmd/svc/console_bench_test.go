package main

import (
	"fmt"
	"net/http"
	"net/http/httptrace"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"svc/auth"
	"svc/registry"
)

// seedConsole makes 100 agents through the API and 1,000 deployment records (10 per agent,
// newest first, the newest production one active) straight in the platform's database, then
// restarts svc up on it. It returns the running platform and one agent's id.
func seedConsole(b *testing.B) (*benchPlatform, string) {
	b.Helper()
	dataDir := b.TempDir()
	p := startPlatformAt(b, dataDir)
	ids := make([]string, 100)
	for i := range ids {
		var a struct{ AgentID string }
		if code := p.call(b, "POST", "/api/agents", map[string]any{"name": fmt.Sprintf("Bench %03d", i)}, nil, &a); code != 201 {
			b.Fatalf("create agent %d: %d", i, code)
		}
		ids[i] = a.AgentID
	}
	token := p.token
	p.cancel()
	db := dataDB(b, dataDir)
	now := time.Now().UTC()
	rows := make([]registry.Deployment, 0, 1000)
	for _, id := range ids {
		for j := range 10 {
			created := now.Add(-time.Duration(j) * time.Hour)
			ready := created.Add(time.Minute)
			env := []string{"production", "staging"}[j%2]
			rows = append(rows, registry.Deployment{ID: auth.NewID("d"), AgentID: id, BuildID: auth.NewID("b"), Environment: env,
				Branch: "main", CommitSHA: fmt.Sprintf("%040x", j), Status: registry.StatusReady, IsActive: j < 2,
				CreatedAt: created, ReadyAt: &ready, ActivatedAt: &ready})
		}
	}
	if err := db.CreateInBatches(rows, 200).Error; err != nil {
		b.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
	q := startPlatformAt(b, dataDir)
	q.token = token
	return q, ids[50]
}

// ttfb is the time from sending a GET of path to the first byte of its answer.
func ttfb(b *testing.B, p *benchPlatform, path string, auth bool) time.Duration {
	var first time.Time
	req, _ := http.NewRequest("GET", p.url+path, nil)
	if auth {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Now() }}))
	start := time.Now()
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	return first.Sub(start)
}

func reportSpread(b *testing.B, ds []time.Duration, unit string) {
	slices.Sort(ds)
	b.ReportMetric(float64(percentile(ds, 0.5).Microseconds())/1000, unit+"-p50-ms")
	b.ReportMetric(float64(percentile(ds, 0.9).Microseconds())/1000, unit+"-p90-ms")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, unit+"-max-ms")
}

// BenchmarkConsoleDeployments: the deployments page of an agent (its shell and the API calls
// it makes: who the token is, the agent, a page of its deployments, its active ones) with 100 agents and 1,000
// deployments on svc up: time to first byte of each with net/http, and time to interactive
// (navigation start to the deployments table's rows rendered) in headless Chromium.
func BenchmarkConsoleDeployments(b *testing.B) {
	p, agentID := seedConsole(b)
	for _, c := range []struct {
		name, path string
		auth       bool
	}{
		{"ttfb/shell", "/console/agents/" + agentID, false},
		{"ttfb/app.js", "/console/assets/app.js", false},
		{"ttfb/self", "/api/tokens/self", true},
		{"ttfb/agent", "/api/agents/" + agentID, true},
		{"ttfb/deployments", "/api/agents/" + agentID + "/deployments", true},
		{"ttfb/deployments-page", "/api/agents/" + agentID + "/deployments?limit=20", true},
		{"ttfb/agents", "/api/agents", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				ds = append(ds, ttfb(b, p, c.path, c.auth))
			}
			reportSpread(b, ds, "ttfb")
		})
	}
	b.Run("interactive", func(b *testing.B) {
		br := newBrowser(b)
		br.signIn(p.url, p.token)
		page := p.url + "/console/agents/" + agentID
		var wall, inPage []time.Duration
		phases := map[string][]time.Duration{}
		for b.Loop() {
			start := time.Now()
			br.run("open the deployments page", 30*time.Second, chromedp.Navigate(page))
			br.waitFrame("the deployments table", 30*time.Second, `document.querySelectorAll("#deployments tbody tr").length === 10`)
			wall = append(wall, time.Since(start))
			// The page's own mark: navigation start to the table drawn, without the CDP round
			// trips of the navigation and the polling.
			ms := evalAs[float64](br, `performance.getEntriesByName('console:rendered').at(-1).startTime`)
			inPage = append(inPage, time.Duration(ms*float64(time.Millisecond)))
			// Where the time goes, from navigation start: the shell's first byte, the document
			// parsed (its modules run after), the first and the last API call of the page.
			for name, t := range evalAs[map[string]float64](br, consolePhases) {
				phases[name] = append(phases[name], time.Duration(t*float64(time.Millisecond)))
			}
		}
		reportSpread(b, wall, "interactive-cdp")
		reportSpread(b, inPage, "interactive-page")
		for name, ds := range phases {
			slices.Sort(ds)
			b.ReportMetric(float64(percentile(ds, 0.5).Microseconds())/1000, name+"-p50-ms")
		}
	})
}

// consolePhases reads the Navigation and Resource Timing of the page: when the shell's first
// byte came, when its document was parsed, and when the page's first API call started and its
// last one ended, each in ms from navigation start.
const consolePhases = `(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const api = performance.getEntriesByType('resource').filter((r) => new URL(r.name).pathname.startsWith('/api/'));
  return {
    'shell-byte': nav.responseStart,
    'dom-interactive': nav.domInteractive,
    'api-start': api.length ? Math.min(...api.map((r) => r.startTime)) : -1,
    'api-end': api.length ? Math.max(...api.map((r) => r.responseEnd)) : -1,
  };
})()`
