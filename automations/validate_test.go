package automations

import (
	"errors"
	"strings"
	"testing"
	"time"

	"svc/agent"
)

// testAgent is a loaded agent's model with one tool, one store, one skill and one named agent.
func testAgent() *agent.Agent {
	return &agent.Agent{
		Tools:  map[string]*agent.Tool{"triage": {Name: "triage"}},
		Stores: map[string]*agent.Store{"tickets": {Name: "tickets", Entity: agent.StoreEntity{Schema: map[string]agent.StoreField{"status": {Type: "string"}}}}},
		Skills: map[string]*agent.Skill{"refunds": {Name: "refunds"}},
		Agents: map[string]*agent.NamedAgent{"billing": {Name: "billing"}},
	}
}

func TestValidate(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	msg := Action{Message: "brief me"}
	tests := []struct {
		name string
		a    Automation
		want []string // substrings of the error, each naming its field; none: valid
	}{
		{name: "cron weekdays in Oslo", a: Automation{Name: "n", Trigger: Trigger{Cron: "0 7 * * 1-5", Timezone: "Europe/Oslo"}, Action: msg}},
		{name: "every 1m", a: Automation{Name: "n", Trigger: Trigger{Every: "1m"}, Action: msg}},
		{name: "at in the future", a: Automation{Name: "n", Trigger: Trigger{At: "2026-06-02T07:00:00+02:00"}, Action: msg}},
		{name: "event to a tool", a: Automation{Name: "n", Trigger: Trigger{Event: true}, Action: Action{Tool: "triage", Params: map[string]any{"x": 1.0}}}},
		{name: "store write to a store tool", a: Automation{Name: "n", Trigger: Trigger{Store: "tickets", Where: map[string]any{"status": "open"}}, Action: Action{Tool: "store__tickets__get"}}},
		{name: "message to a named agent with a skill", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: Action{Message: "m", Agent: "billing", Skill: "refunds"}, Overlap: OverlapQueue, Catchup: "24h"}},

		{name: "bad cron", a: Automation{Name: "n", Trigger: Trigger{Cron: "61 * * * *"}, Action: msg}, want: []string{"trigger.cron: "}},
		{name: "six-field cron", a: Automation{Name: "n", Trigger: Trigger{Cron: "0 0 7 * * 1"}, Action: msg}, want: []string{"trigger.cron: ", "want 5 fields"}},
		{name: "descriptor", a: Automation{Name: "n", Trigger: Trigger{Cron: "@daily"}, Action: msg}, want: []string{"trigger.cron: "}},
		{name: "cron that never fires", a: Automation{Name: "n", Trigger: Trigger{Cron: "0 0 30 2 *"}, Action: msg}, want: []string{"trigger.cron: ", "never fires"}},
		{name: "unknown timezone", a: Automation{Name: "n", Trigger: Trigger{Cron: "0 7 * * *", Timezone: "Europe/Atlantis"}, Action: msg}, want: []string{"trigger.timezone: ", "Europe/Atlantis"}},
		{name: "timezone without cron", a: Automation{Name: "n", Trigger: Trigger{Every: "1h", Timezone: "UTC"}, Action: msg}, want: []string{"trigger.timezone: "}},
		{name: "every under 1m", a: Automation{Name: "n", Trigger: Trigger{Every: "30s"}, Action: msg}, want: []string{"trigger.every: ", "minimum of 1m"}},
		{name: "every not a duration", a: Automation{Name: "n", Trigger: Trigger{Every: "daily"}, Action: msg}, want: []string{"trigger.every: "}},
		{name: "at in the past", a: Automation{Name: "n", Trigger: Trigger{At: "2026-05-31T12:00:00Z"}, Action: msg}, want: []string{"trigger.at: ", "in the past"}},
		{name: "at not RFC 3339", a: Automation{Name: "n", Trigger: Trigger{At: "tomorrow"}, Action: msg}, want: []string{"trigger.at: "}},
		{name: "no trigger", a: Automation{Name: "n", Action: msg}, want: []string{"trigger: set exactly one"}},
		{name: "two triggers", a: Automation{Name: "n", Trigger: Trigger{Cron: "0 7 * * *", Every: "1h"}, Action: msg}, want: []string{"trigger: has cron and every"}},
		{name: "unknown store", a: Automation{Name: "n", Trigger: Trigger{Store: "orders"}, Action: msg}, want: []string{"trigger.store: ", `"orders"`}},
		{name: "where on an unknown field", a: Automation{Name: "n", Trigger: Trigger{Store: "tickets", Where: map[string]any{"colour": "red"}}, Action: msg}, want: []string{"trigger.where.colour: "}},
		{name: "no action", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}}, want: []string{"action: set exactly one"}},
		{name: "two actions", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: Action{Message: "m", Tool: "triage"}}, want: []string{"action: has message and tool"}},
		{name: "unknown tool", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: Action{Tool: "launch"}}, want: []string{"action.tool: ", `"launch"`}},
		{name: "a built-in is not an entry point", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: Action{Tool: "ask_user"}}, want: []string{"action.tool: "}},
		{name: "unknown agent", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: Action{Message: "m", Agent: "sales"}}, want: []string{"action.agent: ", `"sales"`}},
		{name: "unknown skill", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: Action{Message: "m", Skill: "poetry"}}, want: []string{"action.skill: ", `"poetry"`}},
		{name: "params on a message", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: Action{Message: "m", Params: map[string]any{}}}, want: []string{"action.params: "}},
		{name: "bad overlap", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: msg, Overlap: "parallel"}, want: []string{"overlap: ", `"parallel"`}},
		{name: "catchup over 24h", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: msg, Catchup: "25h"}, want: []string{"catchup: ", "24h"}},
		{name: "catchup not a duration", a: Automation{Name: "n", Trigger: Trigger{Every: "1h"}, Action: msg, Catchup: "an hour"}, want: []string{"catchup: "}},
		{name: "no name", a: Automation{Trigger: Trigger{Every: "1h"}, Action: msg}, want: []string{"name: is required"}},
		{name: "every problem at once", a: Automation{Name: "n", Trigger: Trigger{Every: "10s"}, Action: Action{Tool: "launch"}, Overlap: "x"}, want: []string{"trigger.every: ", "action.tool: ", "overlap: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(&tt.a, testAgent(), now)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want %q", tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate = %v, does not match ErrInvalid", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate = %v, not a *FieldError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateWithoutAgent(t *testing.T) {
	a := &Automation{Name: "n", Trigger: Trigger{Store: "orders"}, Action: Action{Tool: "launch"}}
	if err := Validate(a, nil, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Errorf("Validate(nil agent) = %v, want nil: names are checked only against an agent", err)
	}
}
