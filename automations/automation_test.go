package automations

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeDefaults(t *testing.T) {
	a, err := Decode([]byte(`{"name": "morning brief", "trigger": {"cron": "0 7 * * 1-5"}, "action": {"message": "brief me"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Environment != "production" || !a.IsEnabled() || a.Overlap != OverlapSkip || a.Catchup != "1h0m0s" || a.Trigger.Timezone != "UTC" {
		t.Errorf("defaults = env %q enabled %v overlap %q catchup %q tz %q; want production true skip 1h UTC",
			a.Environment, a.IsEnabled(), a.Overlap, a.Catchup, a.Trigger.Timezone)
	}
	b, err := Decode([]byte(`{"name": "n", "trigger": {"every": "15m"}, "action": {"tool": "t", "params": {"a": 1}},
		"environment": "preview-x", "context": {"k": "v"}, "enabled": false, "overlap": "allow", "catchup": "2h"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b.Environment != "preview-x" || b.IsEnabled() || b.Overlap != OverlapAllow || b.Catchup != "2h" || b.Context["k"] != "v" || b.Action.Params["a"] != 1.0 {
		t.Errorf("decoded = %+v", b)
	}
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown top-level field", `{"name": "n", "schedule": "daily"}`, "schedule: unknown field"},
		{"unknown trigger field", `{"name": "n", "trigger": {"cron": "0 7 * * *", "tz": "UTC"}}`, "trigger.tz: unknown field"},
		{"unknown action field", `{"name": "n", "action": {"message": "m", "model": "x"}}`, "action.model: unknown field"},
		{"trigger not an object", `{"name": "n", "trigger": "daily"}`, "trigger: must be a JSON object"},
		{"wrong type", `{"name": "n", "enabled": "yes"}`, "enabled: must be a boolean"},
		{"nested wrong type", `{"name": "n", "trigger": {"event": "yes"}}`, "trigger.event: must be a boolean"},
		{"not an object", `[]`, "automation: "},
		{"trailing data", `{"name": "n"} {}`, "automation: invalid character"},
		{"server fields are not input", `{"name": "n", "Created": "2026-01-01T00:00:00Z"}`, "Created: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode(%s) = %v, want an error containing %q", tt.in, err, tt.want)
			}
		})
	}
	var fe *FieldError
	if _, err := Decode([]byte(`{"trigger": {"bogus": 1}}`)); !errors.As(err, &fe) || fe.Field != "trigger.bogus" {
		t.Errorf("Decode = %v, want a *FieldError for trigger.bogus", err)
	}
}
