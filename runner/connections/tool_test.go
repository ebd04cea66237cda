package connections_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/tools"
)

func deskPolicy() *agent.Policy {
	return &agent.Policy{Endpoints: map[string]agent.EndpointRule{
		"GET /incidents":                 {Confirm: "never", Reason: "List open incidents"},
		"GET /incidents/{id}":            {Confirm: "never", Reason: "Read one incident"},
		"POST /incidents/{id}/subscribe": {Confirm: "always", Reason: "Subscribe the customer to updates"},
		"PATCH /incidents/{id}":          {Confirm: "write", Reason: "Edit an incident"},
		"GET /reports/{id}":              {Confirm: "always", Reason: "Reports are costly"},
		"*":                              {Confirm: "never", Reason: "Everything else is read-only"},
	}}
}

func deskAccess() *agent.Access {
	return &agent.Access{
		Endpoints: map[string]string{
			"GET /incidents/internal":   "deny",
			"DELETE /incidents/{id}":    "deny",
			"POST /incidents/{id}/tags": "confirm",
			"PUT /incidents/{id}/notes": "allow",
			"*":                         "allow",
		},
		Hidden: []string{"email", "customer.ssn", "items.secret"},
	}
}

// TestRequestRules is the table of calls through the tool: method × path × rule → allowed,
// needs the user's approval, or refused before anything is sent; with hidden fields stripped
// from every answer.
func TestRequestRules(t *testing.T) {
	var hits atomic.Int64
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		echo(http.StatusOK)(w, r)
	}), []*agent.Connection{conn("status", deskPolicy(), deskAccess())}, nil)

	const (
		allowed = "allowed"
		confirm = "confirm"
		refused = "refused"
	)
	cases := []struct {
		name   string
		args   string
		want   string
		sent   string // the path the server saw, for allowed calls
		errHas string // for refused calls
	}{
		{"read listed", `{"connection":"status","method":"GET","path":"/incidents"}`, allowed, "/incidents", ""},
		{"read param", `{"connection":"status","method":"get","path":"/incidents/42"}`, allowed, "/incidents/42", ""},
		{"read fallback", `{"connection":"status","method":"GET","path":"/status/summary"}`, allowed, "/status/summary", ""},
		{"read with confirm always", `{"connection":"status","method":"GET","path":"/reports/7"}`, confirm, "/reports/7", ""},
		{"write confirm always", `{"connection":"status","method":"POST","path":"/incidents/42/subscribe","intent":"write","body":{"email":"a@b.c"}}`, confirm, "/incidents/42/subscribe", ""},
		{"write confirm write", `{"connection":"status","method":"PATCH","path":"/incidents/42","intent":"write","body":{"title":"x"}}`, confirm, "/incidents/42", ""},
		{"write access confirm", `{"connection":"status","method":"POST","path":"/incidents/42/tags","intent":"confirmed_write","body":["a"]}`, confirm, "/incidents/42/tags", ""},
		{"write access allow", `{"connection":"status","method":"PUT","path":"/incidents/42/notes","intent":"write","body":{"text":"hi"}}`, allowed, "/incidents/42/notes", ""},
		{"deny literal over param", `{"connection":"status","method":"GET","path":"/incidents/internal"}`, refused, "", `access.json rule "GET /incidents/internal" denies GET /incidents/internal`},
		{"deny encoded literal", `{"connection":"status","method":"GET","path":"/incidents/%69nternal"}`, refused, "", `denies`},
		{"deny write", `{"connection":"status","method":"DELETE","path":"/incidents/42","intent":"write"}`, refused, "", `rule "DELETE /incidents/{id}" denies`},
		{"write only fallback", `{"connection":"status","method":"POST","path":"/status","intent":"write"}`, refused, "", `refuses writes`},
		{"write without intent", `{"connection":"status","method":"PATCH","path":"/incidents/42"}`, refused, "", `intent: PATCH changes data and needs intent "write"`},
		{"write with intent read", `{"connection":"status","method":"POST","path":"/incidents/42/subscribe","intent":"read"}`, refused, "", `intent:`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := hits.Load()
			call := tools.Call{ID: "c", Arguments: json.RawMessage(c.args), Session: tools.Session{ID: "s"}}
			req, nerr := h.tool.NeedsApproval(context.Background(), call)
			need := req != nil
			res, err := h.tool.Call(context.Background(), call)
			if c.want == refused {
				if nerr == nil || err == nil {
					t.Fatalf("NeedsApproval err = %v, Call err = %v; want both to refuse", nerr, err)
				}
				for _, e := range []error{nerr, err} {
					if !strings.Contains(e.Error(), c.errHas) {
						t.Errorf("error %q does not contain %q", e, c.errHas)
					}
				}
				if hits.Load() != before {
					t.Error("a refused call reached the server")
				}
				return
			}
			if nerr != nil {
				t.Fatalf("NeedsApproval: %v", nerr)
			}
			if need != (c.want == confirm) {
				t.Errorf("NeedsApproval = %v, want %v", need, c.want == confirm)
			}
			out := response(t, res, err)
			if out["status"] != float64(200) {
				t.Errorf("status = %v", out["status"])
			}
			body := out["body"].(map[string]any)
			if body["path"] != c.sent {
				t.Errorf("server saw path %v, want %s", body["path"], c.sent)
			}
			cust := body["customer"].(map[string]any)
			if _, ok := cust["email"]; ok {
				t.Error(`hidden "email" not stripped from customer`)
			}
			if _, ok := cust["ssn"]; ok {
				t.Error(`hidden "customer.ssn" not stripped`)
			}
			if cust["name"] != "Ada" {
				t.Errorf("customer.name = %v, want it kept", cust["name"])
			}
			for _, it := range body["items"].([]any) {
				m := it.(map[string]any)
				if _, ok := m["secret"]; ok {
					t.Error(`hidden "items.secret" not stripped from an array element`)
				}
				if _, ok := m["Email"]; ok {
					t.Error(`hidden "email" not stripped as "Email" inside an array`)
				}
			}
		})
	}
}

// TestApprovalDecision: what the loop gets for confirmation_required, and that confirmed_write
// never skips an approval while Call never asks.
func TestApprovalDecision(t *testing.T) {
	h := newHarness(t, echo(http.StatusCreated), []*agent.Connection{conn("status", deskPolicy(), deskAccess())}, nil)
	call := func(args string) tools.Call {
		return tools.Call{ID: "c", Arguments: json.RawMessage(args)}
	}
	d, err := h.tool.Decide(context.Background(), call(`{"connection":"status","method":"POST","path":"/incidents/9/subscribe","intent":"confirmed_write","body":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := connections.Decision{
		Connection: "status", Method: "POST", Endpoint: "/incidents/9/subscribe", Rule: "POST /incidents/{id}/subscribe",
		NeedsApproval: true, ApprovalRule: `policy.json rule "POST /incidents/{id}/subscribe" (confirm: always)`,
		Reason: "Subscribe the customer to updates", Intent: "confirmed_write", Escalated: true,
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Decide (-want +got):\n%s", diff)
	}

	d, err = h.tool.Decide(context.Background(), call(`{"connection":"status","method":"POST","path":"/incidents/9/tags","intent":"write","body":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !d.NeedsApproval || d.Escalated || !strings.Contains(d.Reason, `access.json rule "POST /incidents/{id}/tags"`) {
		t.Errorf("Decide for an access confirm = %+v", d)
	}

	// Call runs an approval-needing call without asking (the loop asked before).
	res, err := h.call(t, `{"connection":"status","method":"POST","path":"/incidents/9/subscribe","intent":"write","body":{"email":"x"}}`, nil)
	if out := response(t, res, err); out["status"] != float64(201) {
		t.Errorf("status = %v", out["status"])
	}
}

func TestRequestArguments(t *testing.T) {
	h := newHarness(t, echo(200), []*agent.Connection{conn("status", deskPolicy(), nil), conn("billing", nil, nil)}, nil)
	cases := []struct{ args, want string }{
		{`{"connection":"status","method":"GET","path":"/a","headers":{}}`, `unknown field "headers"`},
		{`{"method":"GET","path":"/a"}`, `connection: required, one of billing, status`},
		{`{"connection":"crm","method":"GET","path":"/a"}`, `connection: "crm" is not one of billing, status`},
		{`{"connection":"status","method":"TRACE","path":"/a"}`, `method: "TRACE" is not one of`},
		{`{"connection":"status","method":"GET","path":"/a","intent":"maybe"}`, `intent: "maybe" is not one of`},
		{`{"connection":"status","method":"GET","path":"/a","body":{"x":1}}`, `body: only POST, PUT, PATCH and DELETE send a body`},
		{`{"connection":"status","method":"GET","path":"/a","query":{"q":{"x":1}}}`, `query.q: want a string, number or boolean`},
		{`{"connection":"status","method":"GET","path":"/a","query":{"api_key":"mine"}}`, `query.api_key: set by connection status itself`},
		{`{"connection":"status","method":"GET","path":"/a?api_key=mine"}`, `query.api_key: set by connection status itself`},
		{`{"connection":"status","method":"GET","path":"/a/{{context.tenant}}"}`, `path: {{context.tenant}} has no value`},
		{`{"connection":"status","method":"GET","path":"/a","query":{"t":"{{context.tenant}}"}}`, `query.t: {{context.tenant}} has no value`},
		{`[]`, `want {"connection"`},
	}
	for _, c := range cases {
		_, err := h.call(t, c.args, nil)
		if !errors.Is(err, tools.ErrBadArguments) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want a bad-arguments error with %q", c.args, err, c.want)
		}
	}
}

// TestRequestShape: the URL the server sees (base path, query from both places, auth), the
// headers it gets, the body it receives and the headers that come back.
func TestRequestShape(t *testing.T) {
	var got *http.Request
	var gotBody string
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b := make([]byte, 100)
		n, _ := r.Body.Read(b)
		gotBody = string(b[:n])
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "session=abc")
		w.Header().Set("WWW-Authenticate", "Bearer realm=x")
		w.Header().Set("Location", "/incidents/43")
		w.Header().Add("Link", "<a>; rel=next")
		w.Header().Add("Link", "<b>; rel=last")
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"id":43,"big":12345678901234567890}`))
	}), []*agent.Connection{conn("status", deskPolicy(), nil)}, nil)
	h.secrets["API_URL"] = h.srv.URL + "/api/v1/"

	res, err := h.call(t, `{"connection":"status","method":"PATCH","path":"/incidents/42?fields=id","query":{"page":2,"full":true,"tag":["a","b"]},"intent":"write","body":{"title":"<x>"}}`, nil)
	out := response(t, res, err)
	if got.URL.Path != "/api/v1/incidents/42" {
		t.Errorf("path = %q", got.URL.Path)
	}
	wantQ := "api_key=" + strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(secretKey, "/", "%2F"), "+", "%2B"), " ", "+") + "&fields=id&full=true&page=2&tag=a&tag=b"
	if got.URL.RawQuery != wantQ {
		t.Errorf("query = %q, want %q", got.URL.RawQuery, wantQ)
	}
	if a := got.Header.Get("Authorization"); a != secretToken {
		t.Errorf("Authorization = %q", a)
	}
	if ct := got.Header.Get("Content-Type"); ct != "application/json" || gotBody != `{"title":"<x>"}` {
		t.Errorf("body = %q (%s)", gotBody, ct)
	}
	wantHeaders := map[string]any{"Content-Type": "application/json", "Location": "/incidents/43", "Link": "<a>; rel=next, <b>; rel=last"}
	if d := cmp.Diff(wantHeaders, out["headers"]); d != "" {
		t.Errorf("returned headers (-want +got):\n%s", d)
	}
	if !strings.Contains(res.Content, `"big":12345678901234567890`) {
		t.Errorf("a large number lost its digits: %s", res.Content)
	}
}

// TestContextInjection: {{context.KEY}} in the path (escaped as a segment), the query and an
// auth header (a secret whose value is a template), and in endpoint rules.
func TestContextInjection(t *testing.T) {
	var got *http.Request
	c := conn("crm", &agent.Policy{Endpoints: map[string]agent.EndpointRule{
		"GET /tenants/{{context.tenant}}/tickets": {Confirm: "never"},
		"GET /tenants/{id}/tickets":               {Confirm: "always"},
	}}, nil)
	c.Spec.Auth.Headers["X-Tenant"] = "env:TENANT_HEADER"
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.WriteHeader(204)
	}), []*agent.Connection{c}, nil)
	h.secrets["TENANT_HEADER"] = "tenant={{context.tenant}}"
	ctx := map[string]string{"tenant": "acme corp", "user": "u/1"}

	args := `{"connection":"crm","method":"GET","path":"/tenants/{{context.tenant}}/tickets","query":{"user":"{{context.user}}"}}`
	req, err := h.tool.NeedsApproval(context.Background(), tools.Call{Arguments: json.RawMessage(args), Session: tools.Session{Context: ctx}})
	if err != nil || req != nil {
		t.Errorf("NeedsApproval = %+v, %v; want the context rule (confirm never) to apply", req, err)
	}
	res, err := h.call(t, args, ctx)
	if out := response(t, res, err); out["status"] != float64(204) || out["body"] != nil {
		t.Errorf("result = %s", res.Content)
	}
	if got.URL.EscapedPath() != "/tenants/acme%20corp/tickets" || got.URL.Query().Get("user") != "u/1" || got.Header.Get("X-Tenant") != "tenant=acme corp" {
		t.Errorf("server saw %s ? %s, X-Tenant %q", got.URL.EscapedPath(), got.URL.RawQuery, got.Header.Get("X-Tenant"))
	}

	// Another tenant's path is not the context rule: the {id} rule asks first.
	req, err = h.tool.NeedsApproval(context.Background(), tools.Call{Arguments: json.RawMessage(`{"connection":"crm","method":"GET","path":"/tenants/globex/tickets"}`), Session: tools.Session{Context: ctx}})
	if err != nil || req == nil {
		t.Errorf("NeedsApproval for another tenant = %+v, %v; want a request", req, err)
	}

	// A missing key in an auth template is an error naming the key and the field.
	_, err = h.call(t, `{"connection":"crm","method":"GET","path":"/x"}`, map[string]string{})
	var miss *connections.MissingContextError
	if !errors.As(err, &miss) || miss.Key != "tenant" || miss.Field != "auth.headers.X-Tenant" {
		t.Errorf("err = %v, want a missing tenant in auth.headers.X-Tenant", err)
	}
}

func TestLabelsAndSpec(t *testing.T) {
	h := newHarness(t, echo(200), []*agent.Connection{conn("status", nil, nil), conn("billing", nil, nil)}, nil)
	run, done := h.tool.Labels(json.RawMessage(`{"connection":"status","method":"get","path":"/incidents"}`))
	if run != "Calling status: GET /incidents" || done != "Called status: GET /incidents" {
		t.Errorf("labels = %q, %q", run, done)
	}
	sp := h.tool.Spec()
	var schema struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(sp.Parameters, &schema); err != nil {
		t.Fatalf("parameters: %v", err)
	}
	if sp.Name != "request" || !cmp.Equal(schema.Properties["connection"].Enum, []string{"billing", "status"}) || !cmp.Equal(schema.Required, []string{"connection", "method", "path"}) {
		t.Errorf("spec = %s %s", sp.Name, sp.Parameters)
	}
	one, err := h.client.Tool([]string{"status"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Call(context.Background(), tools.Call{Arguments: json.RawMessage(`{"connection":"billing","method":"GET","path":"/"}`)}); err == nil || !strings.Contains(err.Error(), `"billing" is not one of status`) {
		t.Errorf("a named agent's tool reached another connection: %v", err)
	}
}

// TestRateLimitThroughTool: the burst passes, the next call is an error saying when to retry,
// refused calls spend nothing, and time brings a token back.
func TestRateLimitThroughTool(t *testing.T) {
	var hits atomic.Int64
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }),
		[]*agent.Connection{conn("status", nil, &agent.Access{
			Endpoints: map[string]string{"GET /denied": "deny", "*": "allow"},
			RateLimit: &agent.RateLimit{RequestsPerMinute: 30, Burst: 2},
		})}, nil)
	call := func(path string) error {
		_, err := h.call(t, `{"connection":"status","method":"GET","path":"`+path+`"}`, nil)
		return err
	}
	for range 3 {
		if err := call("/denied"); !errors.Is(err, connections.ErrDenied) {
			t.Fatalf("denied call: %v", err)
		}
	}
	for i := range 2 {
		if err := call("/ok"); err != nil {
			t.Fatalf("call %d of the burst: %v", i+1, err)
		}
	}
	err := call("/ok")
	var rl *connections.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second || !strings.Contains(err.Error(), "retry in 2 seconds") {
		t.Fatalf("third call: %v", err)
	}
	h.clock.Advance(2*time.Second - time.Millisecond)
	if err := call("/ok"); !errors.As(err, &rl) || !strings.Contains(err.Error(), "retry in 1 second") {
		t.Fatalf("1ms early: %v", err)
	}
	h.clock.Advance(time.Millisecond)
	if err := call("/ok"); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
}
