package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

// An event trigger's secret is stored sealed, is read back only through EventSecret, and does
// not open for another automation's row; a store without the secrets key refuses one.
func TestAutomationEventSecret(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewStores(db, testCipher(t, 7), nil, nil).Automations
		spec := json.RawMessage(`{"name":"hook","trigger":{"event":true},"action":{"message":"hi"}}`)
		a, err := s.Create(ctx, registry.Automation{AgentID: ag.ID, Name: "hook", Spec: spec, Enabled: true, EventSecret: "whsec_abc"})
		if err != nil {
			t.Fatal(err)
		}
		if a.EventSecret != "" {
			t.Errorf("Create returned the secret %q; reads leave it empty", a.EventSecret)
		}
		var stored string
		if err := db.Raw("SELECT event_secret FROM automations WHERE id = ?", a.ID).Scan(&stored).Error; err != nil {
			t.Fatal(err)
		}
		if stored == "" || strings.Contains(stored, "whsec_abc") {
			t.Errorf("stored event_secret = %q, want it sealed", stored)
		}
		if got, err := s.EventSecret(ctx, a.ID); err != nil || got != "whsec_abc" {
			t.Errorf("EventSecret = %q, %v; want whsec_abc", got, err)
		}
		plain, err := s.Create(ctx, registry.Automation{AgentID: ag.ID, Name: "plain", Spec: spec, Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.EventSecret(ctx, plain.ID); err != nil || got != "" {
			t.Errorf("EventSecret of an automation without one = %q, %v", got, err)
		}
		// A sealed value copied to another row does not open there.
		if err := db.Exec("UPDATE automations SET event_secret = ? WHERE id = ?", stored, plain.ID).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := s.EventSecret(ctx, plain.ID); err == nil {
			t.Error("a sealed secret copied to another automation opened")
		}
		if _, err := s.EventSecret(ctx, "au_missing"); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("EventSecret of a missing automation: %v", err)
		}
		if _, err := registry.NewAutomations(db).Create(ctx, registry.Automation{AgentID: ag.ID, Name: "x", Spec: spec, EventSecret: "whsec_x"}); err == nil {
			t.Error("a store without the secrets key stored an event secret")
		}
	})
}
