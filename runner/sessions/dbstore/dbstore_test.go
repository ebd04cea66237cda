package dbstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/sessionstest"
)

func TestStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		sessionstest.Run(t, func(t *testing.T) sessions.Store {
			// Each subtest gets its own tables' worth of rows: clear them.
			if err := db.Exec("DELETE FROM session_messages").Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Exec("DELETE FROM sessions").Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Exec("DELETE FROM runs").Error; err != nil {
				t.Fatal(err)
			}
			return dbstore.New(db)
		})
	})
}

// A run saved with more entries than one insert carries (a session's first save, say) keeps
// every entry, in order, and the run once.
func TestSaveRunManyEntries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		st := dbstore.New(db)
		now := time.Now().UTC()
		s := &sessions.Session{ID: "ses_many", AgentID: "a1", Status: sessions.StatusIdle, CreatedAt: now, UpdatedAt: now}
		for i := range 450 {
			s.Messages = append(s.Messages, sessions.Entry{Message: models.Message{Role: models.RoleUser, Content: strconv.Itoa(i)}, At: now})
		}
		run := &sessions.Run{ID: "run_many", AgentID: "a1", SessionID: s.ID, Reason: "model_stop", StartedAt: now, EndedAt: now}
		for range 2 {
			if err := st.SaveRun(ctx, s, 0, run); err != nil {
				t.Fatal(err)
			}
		}
		got, err := st.Load(ctx, s.ID)
		if err != nil || len(got.Messages) != 450 || got.Messages[449].Content != "449" || got.Messages[200].Content != "200" {
			t.Fatalf("load: %v, %d entries", err, len(got.Messages))
		}
		var n int64
		if err := db.Table("runs").Where("session_id = ?", s.ID).Count(&n).Error; err != nil || n != 1 {
			t.Errorf("runs of the session: %d, %v; want 1", n, err)
		}
	})
}
