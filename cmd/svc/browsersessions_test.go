package main

import (
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/access"
	"svc/runner/access/sessionstest"
)

// TestBrowserSessionsConformance runs the access.Sessions suite on the platform's store, on
// SQLite and Postgres.
func TestBrowserSessionsConformance(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		// The suite's sessions are of agent agt_1, which the foreign key wants to exist.
		if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('agt_1','agt-1','A',?,?)`, time.Now(), time.Now()).Error; err != nil {
			t.Fatal(err)
		}
		sessionstest.Run(t, func(t *testing.T) access.Sessions {
			return browserSessions{store: registry.NewBrowserSessions(db)}
		})
	})
}
