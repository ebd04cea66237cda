package dbstore_test

import (
	"testing"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
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
			return dbstore.New(db)
		})
	})
}
