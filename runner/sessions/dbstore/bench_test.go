package dbstore_test

import (
	"context"
	"testing"
	"time"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
)

// BenchmarkSaveTurnEnd is the save at a turn's end on Postgres (SVC_TEST_DATABASE_URL or the
// local server): the session record and the turn's two new entries, without the run's row (Save)
// and with it (SaveRun, as every turn does since runs are recorded). Each iteration does one of
// each, alternating, so that both see the same machine; save-ns/op and save+run-ns/op are their
// mean times.
func BenchmarkSaveTurnEnd(b *testing.B) {
	ctx := context.Background()
	st := dbstore.New(dbtest.Postgres(b))
	now := time.Now().UTC()
	s := &sessions.Session{ID: "ses_bench", AgentID: "ag_bench", DeployID: "dbench", Status: sessions.StatusIdle, Title: "bench",
		Metadata: map[string]string{"userId": "u-123456", "screen": "home"}, CreatedAt: now, UpdatedAt: now}
	turn := func() int {
		from := len(s.Messages)
		s.Messages = append(s.Messages,
			sessions.Entry{Message: models.Message{Role: models.RoleUser, Content: "Say hello to the benchmark, with a longer message to store"}, At: now},
			sessions.Entry{Message: models.Message{Role: models.RoleAssistant, Content: "echo: Say hello to the benchmark, with a longer message to store"}, At: now})
		return from
	}
	for range 50 {
		if err := st.Save(ctx, s, turn()); err != nil {
			b.Fatal(err)
		}
	}
	var plain, withRun time.Duration
	n := 0
	for b.Loop() {
		from := turn()
		t0 := time.Now()
		if err := st.Save(ctx, s, from); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(t0)
		from = turn()
		run := &sessions.Run{ID: auth.NewID("run_"), AgentID: s.AgentID, DeployID: s.DeployID, SessionID: s.ID, Kind: sessions.RunChat,
			StartedAt: now, EndedAt: time.Now(), Reason: "model_stop", Provider: "echo", Model: "echo", Steps: 1,
			Usage: sessions.Usage{InputTokens: 50, OutputTokens: 3}, UserID: "u-verified", AuthMethod: "runtime_token", Metadata: s.Metadata}
		t0 = time.Now()
		if err := st.SaveRun(ctx, s, from, run); err != nil {
			b.Fatal(err)
		}
		withRun += time.Since(t0)
		n++
	}
	b.ReportMetric(float64(plain.Nanoseconds())/float64(n), "save-ns/op")
	b.ReportMetric(float64(withRun.Nanoseconds())/float64(n), "save+run-ns/op")
}
