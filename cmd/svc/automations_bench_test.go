package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/automations"
	"svc/migrations"
	"svc/migrations/dbtest"
)

// benchAutomations is the number of automations of BenchmarkAutomationMinute.
const benchAutomations = 10_000

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// seedAutomations stores n automations of agentID with spec straight in the database (the
// routes would take longer than the minute measured), created at created(i) and next due at
// next(i).
func seedAutomations(tb testing.TB, db *gorm.DB, agentID string, n int, spec string, created, next func(i int) time.Time) {
	tb.Helper()
	const batch = 500
	for i := 0; i < n; i += batch {
		var vals []string
		var args []any
		for j := i; j < min(n, i+batch); j++ {
			vals = append(vals, "(?, ?, '', '{}', ?, ?, ?, '', '', ?, ?, ?)")
			args = append(args, auth.NewID("au"), agentID, fmt.Sprintf("bench %d", j), spec, true, created(j), created(j), next(j))
		}
		err := db.Exec(`INSERT INTO automations (id, agent_id, owner_scope, saver, name, spec, enabled, disabled_reason, event_secret, created_at, updated_at, next_fire_at) VALUES `+
			strings.Join(vals, ", "), args...).Error
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// fireLags are the lags (fire time to the run's start) of the fires of the window, and how many
// fires of it are not done.
func fireLags(tb testing.TB, db *gorm.DB, from, to time.Time) (lags []time.Duration, notDone int) {
	tb.Helper()
	var rows []struct {
		FireTime  time.Time
		StartedAt *time.Time
		Status    string
	}
	if err := db.Raw(`SELECT fire_time, started_at, status FROM automation_fires WHERE fire_time >= ? AND fire_time < ?`, from, to).Scan(&rows).Error; err != nil {
		tb.Fatal(err)
	}
	for _, r := range rows {
		if r.Status != "done" || r.StartedAt == nil {
			notDone++
			continue
		}
		lags = append(lags, r.StartedAt.Sub(r.FireTime))
	}
	slices.Sort(lags)
	return lags, notDone
}

// BenchmarkAutomationMinute: 10,000 automations, each firing every minute, on one process that
// schedules and runs them (svc up: the scheduler, the fire lane and the runtime), for one
// minute: the lag from each fire time to its run's start (p50, p99) and the process's CPU per
// fire. "spread": every 1m, their anchors spread over the minute; "burst": cron "* * * * *",
// all at the same second. On the embedded defaults (SQLite, the database queue) and on Postgres
// with Redis.
func BenchmarkAutomationMinute(b *testing.B) {
	for _, store := range []string{"sqlite", "postgres"} {
		for _, shape := range []string{"spread", "burst"} {
			b.Run(store+"/"+shape, func(b *testing.B) {
				for range b.N {
					benchMinute(b, store, shape)
				}
			})
		}
	}
}

func benchMinute(b *testing.B, store, shape string) {
	dir := b.TempDir()
	url := "sqlite:" + filepath.Join(dir, "svc.db")
	args := []string{"--turn-concurrency", "64"}
	if store == "postgres" {
		url = dbtest.PostgresURL(b)
		args = append(args, "--database-url", url, "--redis-url", dbtest.RedisURL())
	}
	p := startPlatformAt(b, dir, args...)
	agentID, _, _, _ := upAgent(b, p, "ticker", "hello", "")
	db, err := migrations.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	// The measured minute starts at the next whole minute, at least 20 s away (seeding).
	now := time.Now().UTC()
	from := now.Truncate(time.Minute).Add(time.Minute)
	if from.Sub(now) < 20*time.Second {
		from = from.Add(time.Minute)
	}
	to := from.Add(time.Minute)
	switch shape {
	case "spread":
		step := time.Minute / benchAutomations
		seedAutomations(b, db, agentID, benchAutomations, `{"name":"bench","trigger":{"every":"1m"},"action":{"message":"tick"},"environment":"production","overlap":"skip","catchup":"1h"}`,
			func(i int) time.Time { return from.Add(-time.Hour + time.Duration(i)*step) },
			func(i int) time.Time { return from.Add(time.Duration(i) * step) })
	case "burst":
		seedAutomations(b, db, agentID, benchAutomations, `{"name":"bench","trigger":{"cron":"* * * * *","timezone":"UTC"},"action":{"message":"tick"},"environment":"production","overlap":"skip","catchup":"1h"}`,
			func(int) time.Time { return from.Add(-time.Hour) }, func(int) time.Time { return from })
	}
	time.Sleep(time.Until(from))
	b.ResetTimer()
	cpu0 := cpuTime(b)
	time.Sleep(time.Until(to))
	// Let the fires of the minute finish (not longer than another minute), without counting the
	// CPU of the next minute's fires: their automations are paused first.
	if err := db.Exec(`UPDATE automations SET enabled = ? WHERE agent_id = ?`, false, agentID).Error; err != nil {
		b.Fatal(err)
	}
	// A count once a second: the lags are read once, at the end (reading them all the time
	// took a quarter of the process's CPU in the first runs).
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		var done int64
		if err := db.Raw(`SELECT COUNT(*) FROM automation_fires WHERE fire_time >= ? AND fire_time < ? AND status = 'done'`, from, to).Scan(&done).Error; err != nil {
			b.Fatal(err)
		}
		if done >= benchAutomations {
			break
		}
	}
	cpu := cpuTime(b) - cpu0
	lags, notDone := fireLags(b, db, from, to)
	b.StopTimer()
	// The fires that did not run within the minute and the one after are part of the figure,
	// not a failure: a process that cannot keep up shows it in "fires" and the lags.
	b.ReportMetric(float64(len(lags)), "fires")
	b.ReportMetric(float64(notDone), "not-done")
	b.ReportMetric(float64(percentile(lags, 0.5).Microseconds())/1000, "lag-p50-ms")
	b.ReportMetric(float64(percentile(lags, 0.99).Microseconds())/1000, "lag-p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(max(len(lags), 1)), "cpu-ms/fire")
	p.cancel()
}

// BenchmarkAutomationEvent: a signed event to an event trigger on svc up's embedded defaults,
// b.N times: the 202's round trip, and the time from the fire's record (the 202) to its run's
// session started (p50), as the database records them.
func BenchmarkAutomationEvent(b *testing.B) {
	dir := b.TempDir()
	p := startPlatformAt(b, dir)
	_, slug, _, token := upAgent(b, p, "hooked", "hello", "")
	var created struct{ ID, Secret string }
	if s := upCall(b, p, slug, token, "POST", "/api/automations", map[string]any{
		"name": "on event", "trigger": map[string]any{"event": true}, "action": map[string]any{"message": "got it"}, "overlap": "allow",
	}, &created); s != 201 {
		b.Fatalf("create = %d", s)
	}
	db := dataDB(b, dir)
	b.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			_ = s.Close()
		}
	})
	var acks []time.Duration
	b.ResetTimer()
	for i := range b.N {
		body, _ := json.Marshal(map[string]any{"n": i})
		ts := time.Now().Unix()
		req, _ := http.NewRequest("POST", p.url+"/api/automations/"+created.ID+"/events", strings.NewReader(string(body)))
		req.Host = slug + ".apps.localhost"
		req.Header.Set(automations.TimestampHeader, strconv.FormatInt(ts, 10))
		req.Header.Set(automations.SignatureHeader, automations.Sign(created.Secret, ts, body))
		req.Header.Set(automations.EventIDHeader, fmt.Sprintf("evt-%d", i))
		start := time.Now()
		resp, err := benchClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		acks = append(acks, time.Since(start))
		resp.Body.Close()
		if resp.StatusCode != 202 {
			b.Fatalf("event %d = %d", i, resp.StatusCode)
		}
		// One event at a time: the figure is the latency of an idle platform, not a queue's.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			var n int64
			db.Raw(`SELECT COUNT(*) FROM automation_fires WHERE automation_id = ? AND started_at IS NOT NULL`, created.ID).Scan(&n)
			if n > int64(i) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("event %d did not start a run", i)
			}
		}
	}
	b.StopTimer()
	var rows []struct {
		FiredAt   time.Time
		StartedAt time.Time
	}
	if err := db.Raw(`SELECT fired_at, started_at FROM automation_fires WHERE automation_id = ? AND started_at IS NOT NULL`, created.ID).Scan(&rows).Error; err != nil {
		b.Fatal(err)
	}
	var started []time.Duration
	for _, r := range rows {
		started = append(started, r.StartedAt.Sub(r.FiredAt))
	}
	slices.Sort(started)
	slices.Sort(acks)
	b.ReportMetric(float64(percentile(acks, 0.5).Microseconds())/1000, "ack-p50-ms")
	b.ReportMetric(float64(percentile(started, 0.5).Microseconds())/1000, "started-p50-ms")
	b.ReportMetric(float64(percentile(started, 0.99).Microseconds())/1000, "started-p99-ms")
}
