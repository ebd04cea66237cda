package connections_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/connections"
)

func supportDesk(t *testing.T) *agent.Agent {
	t.Helper()
	ag, err := agent.LoadDir(agenttest.Dir(t, "support-desk"))
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

const promptIntro = "## Connections\n" +
	"Call these HTTP APIs with the request tool. Give the path relative to the connection, such as /items/42, never a full URL. " +
	`Reads use GET. A write (POST, PUT, PATCH, DELETE) needs intent "write"; use "confirmed_write" only when the user has already confirmed that exact change in this conversation. ` +
	"Calls marked \"asks the user first\" wait for the user's approval; calls marked \"refused\" fail.\n"

func TestPrompt(t *testing.T) {
	ag := supportDesk(t)
	crm := &agent.Connection{
		Name:    "crm",
		Surface: "Customers.\n\n```\n# not a heading\n```\n## Fields\n- `id`",
		Policy: &agent.Policy{Endpoints: map[string]agent.EndpointRule{
			"GET /customers/{id}":   {Reason: "Read a customer"},
			"PATCH /customers/{id}": {Confirm: "write", Reason: "Edit a customer"},
		}},
		Access: &agent.Access{
			Endpoints: map[string]string{"GET /customers/{id}": "allow", "PATCH /customers/{id}": "allow", "GET /customers/vip": "deny", "POST /notes": "confirm"},
			RateLimit: &agent.RateLimit{RequestsPerMinute: 30},
		},
	}
	open := &agent.Connection{Name: "weather"}
	got := connections.Prompt([]*agent.Connection{ag.Connections["status"], crm, nil, open})
	want := promptIntro + `
### crm
Customers.

` + "```\n# not a heading\n```" + `
##### Fields
- ` + "`id`" + `

Endpoints:
- GET /customers/vip — refused
- GET /customers/{id}: Read a customer
- PATCH /customers/{id}: Edit a customer — asks the user first
- POST /notes — asks the user first
- Any other call — refused
At most 30 requests a minute (bursts of 1).

### status
#### Status API

- ` + "`GET /incidents`" + ` lists open incidents: ` + "`id`, `title`, `severity` (`minor`, `major`, `critical`), `started_at`" + `.
- ` + "`GET /incidents/{id}`" + ` returns one incident with its ` + "`updates`" + `.
- ` + "`POST /incidents/{id}/subscribe`" + ` with ` + "`{\"email\": \"...\"}`" + ` subscribes a customer to updates.

Endpoints:
- GET /incidents: List open incidents (returns Incident)
- GET /incidents/{id}: Read one incident (returns Incident)
- POST /incidents/{id}/subscribe: Subscribe the customer to updates (returns Subscription) — asks the user first
- Any other call: Everything else is read-only — reads only; writes are refused

### weather
- Any call — reads only; writes are refused
`
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Prompt (-want +got):\n%s", d)
	}
	if connections.Prompt(nil) != "" {
		t.Error("a prompt section without connections")
	}
}

func TestDescribe(t *testing.T) {
	ag := supportDesk(t)
	c := ag.Connections["status"]
	c.Access = &agent.Access{
		Endpoints: map[string]string{"GET /incidents/{id}": "allow", "DELETE /incidents/{id}": "deny", "*": "confirm"},
		Hidden:    []string{"email"},
		RateLimit: &agent.RateLimit{RequestsPerMinute: 10, Burst: 5},
	}
	got := connections.Describe(c)
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sk-") {
		t.Fatal("a secret value in the description")
	}
	want := connections.Description{
		Name: "status", BaseURL: "env:STATUS_API_URL", Format: "rest", TestPath: "/health",
		Auth: &connections.Auth{Headers: []connections.Credential{{Name: "Authorization", Ref: "env:STATUS_API_TOKEN"}}, Query: []connections.Credential{}},
		Endpoints: []connections.Endpoint{
			{Key: "POST /incidents/{id}/subscribe", Method: "POST", Pattern: "/incidents/{id}/subscribe", Confirm: "always", Reason: "Subscribe the customer to updates", Returns: []string{"Subscription"}, Effect: "confirm"},
			{Key: "DELETE /incidents/{id}", Method: "DELETE", Pattern: "/incidents/{id}", Access: "deny", Effect: "deny"},
			{Key: "GET /incidents/{id}", Method: "GET", Pattern: "/incidents/{id}", Access: "allow", Confirm: "never", Reason: "Read one incident", Returns: []string{"Incident"}, Effect: "allow"},
			{Key: "GET /incidents", Method: "GET", Pattern: "/incidents", Confirm: "never", Reason: "List open incidents", Returns: []string{"Incident"}, Effect: "confirm"}, // access "*" asks
			{Key: "*", Method: "*", Access: "confirm", Confirm: "never", Reason: "Everything else is read-only", Returns: []string{}, Effect: "confirm reads, refuse writes"},
		},
		Hidden: []string{"email"}, RateLimit: &agent.RateLimit{RequestsPerMinute: 10, Burst: 5}, Surface: c.Surface,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Describe (-want +got):\n%s", d)
	}
}
