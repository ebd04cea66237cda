package runtime_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"svc/automations"
	"svc/registry"
	"svc/runner/runtime"
)

// fires records the fires a runtime enqueues.
type fires struct {
	mu   sync.Mutex
	list []runtime.AutomationFire
}

func (f *fires) fire(_ context.Context, af runtime.AutomationFire) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, af)
	return nil
}

func (f *fires) all() []runtime.AutomationFire {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]runtime.AutomationFire(nil), f.list...)
}

// automationEnv is a support-desk runtime with automations in SQLite, runtime tokens and ak_
// keys, and the fires it enqueues recorded.
type automationEnv struct {
	*env
	store *registry.Automations
	fired *fires
	sg    *signer
	key   string
}

func startAutomations(t *testing.T) *automationEnv {
	t.Helper()
	keys := newKeys(t)
	key := keys.create(t, agentID) // also creates the agent row
	store := registry.NewStores(keys.db, testCipher(t), nil, nil).Automations
	f := &fires{}
	sg := newSigner(t)
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), AgentID: agentID, Verifier: sg.s, Keys: keys.checker,
		Automations: &runtime.Automations{Store: store, Fire: f.fire}})
	return &automationEnv{env: e, store: store, fired: f, sg: sg, key: key}
}

func testCipher(t *testing.T) *registry.Cipher {
	t.Helper()
	c, err := registry.NewCipher([]byte(strings.Repeat("c", registry.SecretKeySize)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hourly(name string) map[string]any {
	return map[string]any{"name": name, "trigger": map[string]any{"cron": "0 * * * *"}, "action": map[string]any{"message": "digest"}}
}

// Owner scopes as a route × credential table: each credential sees and changes its own scope's
// automations only; another scope's are 404 on every route, as an unknown id.
func TestAutomationOwnerScopes(t *testing.T) {
	e := startAutomations(t)
	creds := map[string]string{
		"ak_ key":            e.key,
		"service token":      e.sg.token(agentID, "", ""),
		"user u1":            e.sg.token(agentID, "u1", ""),
		"user u2":            e.sg.token(agentID, "u2", ""),
		"scope s1":           e.sg.token(agentID, "u3", "s1"),
		"scope s2":           e.sg.token(agentID, "", "s2"),
		"service naming s1":  e.sg.token(agentID, "", ""),
		"user u1 again (s1)": e.sg.token(agentID, "u1", "s1"),
	}
	query := map[string]string{"service naming s1": "?scope_id=s1"}
	wantScope := map[string]string{"ak_ key": "", "service token": "", "user u1": "u1", "user u2": "u2", "scope s1": "s1", "scope s2": "s2",
		"service naming s1": "s1", "user u1 again (s1)": "s1"}
	ids := map[string]string{}
	for name, tok := range creds {
		r := e.do("POST", "/api/automations"+query[name], tok, hourly(name))
		if r.Status != 201 {
			t.Fatalf("%s: create: %d %s", name, r.Status, r.Body)
		}
		if got := str(r.JSON["scope_id"]); got != wantScope[name] {
			t.Errorf("%s: scope_id %q, want %q", name, got, wantScope[name])
		}
		if r.JSON["next_fire_at"] == nil || r.JSON["secret"] != nil {
			t.Errorf("%s: create answered %s", name, r.Body)
		}
		ids[name] = str(r.JSON["id"])
	}
	for name, tok := range creds {
		r := e.do("GET", "/api/automations"+query[name], tok, nil)
		if r.Status != 200 {
			t.Fatalf("%s: list: %d %s", name, r.Status, r.Body)
		}
		var listed []string
		for _, a := range r.JSON["automations"].([]any) {
			listed = append(listed, str(a.(map[string]any)["name"]))
		}
		var want []string
		for other := range creds {
			if wantScope[other] == wantScope[name] {
				want = append(want, other)
			}
		}
		if len(listed) != len(want) {
			t.Errorf("%s lists %v, want the automations of %v", name, listed, want)
		}
		for other, id := range ids {
			visible := wantScope[other] == wantScope[name]
			for _, route := range []struct{ method, path string }{
				{"GET", "/api/automations/" + id}, {"GET", "/api/automations/" + id + "/runs"},
				{"PATCH", "/api/automations/" + id}, {"POST", "/api/automations/" + id + "/run"},
			} {
				var body any
				if route.method == "PATCH" {
					body = map[string]any{"catchup": "2h"}
				}
				sep := "?"
				if strings.Contains(route.path, "?") {
					sep = "&"
				}
				path := route.path
				if q := query[name]; q != "" {
					path += sep + q[1:]
				}
				r := e.do(route.method, path, tok, body)
				switch {
				case visible && r.Status >= 300:
					t.Errorf("%s: %s %s of %s's automation: %d %s", name, route.method, route.path, other, r.Status, r.Body)
				case !visible && (r.Status != 404 || str(r.JSON["error"]) != "not_found"):
					t.Errorf("%s: %s %s of %s's automation: %d %s, want 404", name, route.method, route.path, other, r.Status, r.Body)
				}
			}
		}
	}
	// A user may not name another scope; no credential may move an automation.
	if r := e.do("GET", "/api/automations?scope_id=s1", creds["user u1"], nil); r.Status != 403 || str(r.JSON["error"]) != "scope_forbidden" {
		t.Errorf("user naming another scope: %d %s", r.Status, r.Body)
	}
	if r := e.do("PATCH", "/api/automations/"+ids["ak_ key"], e.key, map[string]any{"scope_id": "s9"}); r.Status != 400 || str(r.JSON["field"]) != "scope_id" {
		t.Errorf("moving an automation: %d %s", r.Status, r.Body)
	}
	// Delete: others' are 404, one's own 204 and then gone.
	if r := e.do("DELETE", "/api/automations/"+ids["user u1"], creds["user u2"], nil); r.Status != 404 {
		t.Errorf("u2 deleting u1's automation: %d", r.Status)
	}
	if r := e.do("DELETE", "/api/automations/"+ids["user u1"], creds["user u1"], nil); r.Status != 204 {
		t.Errorf("u1 deleting its automation: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/api/automations/"+ids["user u1"], creds["user u1"], nil); r.Status != 404 {
		t.Errorf("a deleted automation: %d", r.Status)
	}
}

// Every bad member is a 400 naming its field.
func TestAutomationValidation(t *testing.T) {
	e := startAutomations(t)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name  string
		body  string
		field string
	}{
		{"bad cron", `{"name":"x","trigger":{"cron":"61 * * * *"},"action":{"message":"m"}}`, "trigger.cron"},
		{"unknown timezone", `{"name":"x","trigger":{"cron":"0 7 * * *","timezone":"Mars/Olympus"},"action":{"message":"m"}}`, "trigger.timezone"},
		{"every under a minute", `{"name":"x","trigger":{"every":"30s"},"action":{"message":"m"}}`, "trigger.every"},
		{"at in the past", `{"name":"x","trigger":{"at":"` + past + `"},"action":{"message":"m"}}`, "trigger.at"},
		{"unknown tool", `{"name":"x","trigger":{"every":"5m"},"action":{"tool":"nope"}}`, "action.tool"},
		{"unknown agent", `{"name":"x","trigger":{"every":"5m"},"action":{"message":"m","agent":"nope"}}`, "action.agent"},
		{"unknown skill", `{"name":"x","trigger":{"every":"5m"},"action":{"message":"m","skill":"nope"}}`, "action.skill"},
		{"unknown store", `{"name":"x","trigger":{"store":"nope"},"action":{"message":"m"}}`, "trigger.store"},
		{"unknown where field", `{"name":"x","trigger":{"store":"tickets","where":{"colour":"red"}},"action":{"message":"m"}}`, "trigger.where.colour"},
		{"two triggers", `{"name":"x","trigger":{"every":"5m","event":true},"action":{"message":"m"}}`, "trigger"},
		{"unknown member", `{"name":"x","trigger":{"every":"5m"},"action":{"message":"m"},"colour":1}`, "colour"},
		{"catchup over a day", `{"name":"x","trigger":{"every":"5m"},"action":{"message":"m"},"catchup":"25h"}`, "catchup"},
		{"no name", `{"trigger":{"every":"5m"},"action":{"message":"m"}}`, "name"},
		{"not an object", `[1]`, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/api/automations", e.key, c.body)
			if r.Status != 400 || str(r.JSON["error"]) != "invalid_request" || str(r.JSON["field"]) != c.field {
				t.Errorf("%d %s, want 400 naming %s", r.Status, r.Body, c.field)
			}
		})
	}
	// PATCH validates the merged record the same way; an at that already fired may stay.
	r := e.do("POST", "/api/automations", e.key, hourly("ok"))
	id := str(r.JSON["id"])
	if r := e.do("PATCH", "/api/automations/"+id, e.key, `{"trigger":{"every":"10s"}}`); r.Status != 400 || str(r.JSON["field"]) != "trigger.every" {
		t.Errorf("PATCH every 10s: %d %s", r.Status, r.Body)
	}
	if r := e.do("PATCH", "/api/automations/"+id, e.key, `{"trigger":{"event":true}}`); r.Status != 400 || str(r.JSON["field"]) != "trigger" {
		t.Errorf("PATCH into an event trigger: %d %s", r.Status, r.Body)
	}
	r = e.do("PATCH", "/api/automations/"+id, e.key, `{"enabled":false}`)
	if r.Status != 200 || r.JSON["enabled"] != false || r.JSON["next_fire_at"] != nil {
		t.Errorf("pause: %d %s", r.Status, r.Body)
	}
	r = e.do("PATCH", "/api/automations/"+id, e.key, `{"enabled":true,"name":"renamed"}`)
	if r.Status != 200 || r.JSON["enabled"] != true || r.JSON["next_fire_at"] == nil || str(r.JSON["name"]) != "renamed" {
		t.Errorf("resume: %d %s", r.Status, r.Body)
	}
}

func signedEvent(t *testing.T, e *automationEnv, id, secret, eventID string, body string, at time.Time) *response {
	t.Helper()
	req := e.request("POST", "/api/automations/"+id+"/events", "", body)
	ts := at.Unix()
	req.Header.Set(automations.TimestampHeader, strconv.FormatInt(ts, 10))
	req.Header.Set(automations.SignatureHeader, automations.Sign(secret, ts, []byte(body)))
	if eventID != "" {
		req.Header.Set(automations.EventIDHeader, eventID)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := &response{Status: resp.StatusCode}
	_ = json.NewDecoder(resp.Body).Decode(&out.JSON)
	return out
}

// The event trigger: the secret is answered once; a signed event fires once, with its body; a
// bad signature, a stale timestamp, another automation's secret or a trigger that is not an
// event's is 401 and records nothing; a replayed event id is 200 duplicate.
func TestAutomationEventTrigger(t *testing.T) {
	e := startAutomations(t)
	r := e.do("POST", "/api/automations", e.key, `{"name":"paid","trigger":{"event":true},"action":{"message":"an order was paid"}}`)
	secret, id := str(r.JSON["secret"]), str(r.JSON["id"])
	if r.Status != 201 || !strings.HasPrefix(secret, "whsec_") || r.JSON["next_fire_at"] != nil {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/api/automations/"+id, e.key, nil); r.JSON["secret"] != nil {
		t.Errorf("GET shows the secret again: %s", r.Body)
	}
	sched := str(e.do("POST", "/api/automations", e.key, hourly("sched")).JSON["id"])
	now := time.Now()
	body := `{"order":"o-17"}`
	refused := []struct {
		name                string
		id, secret, eventID string
		at                  time.Time
	}{
		{"bad signature", id, "whsec_wrong", "e0", now},
		{"stale timestamp", id, secret, "e0", now.Add(-6 * time.Minute)},
		{"future timestamp", id, secret, "e0", now.Add(6 * time.Minute)},
		{"not an event trigger", sched, secret, "e0", now},
		{"unknown automation", "au_nope", secret, "e0", now},
	}
	for _, c := range refused {
		if r := signedEvent(t, e, c.id, c.secret, c.eventID, body, c.at); r.Status != 401 || str(r.JSON["error"]) != "unauthenticated" {
			t.Errorf("%s: %d %v, want 401", c.name, r.Status, r.JSON)
		}
	}
	// Headers missing altogether.
	if r := e.do("POST", "/api/automations/"+id+"/events", "", body); r.Status != 401 {
		t.Errorf("unsigned: %d %s", r.Status, r.Body)
	}
	if got := e.fired.all(); len(got) != 0 {
		t.Fatalf("refused events fired %d times", len(got))
	}
	if fires, _, _ := e.store.ListFires(context.Background(), id, registry.FireQuery{}); len(fires) != 0 {
		t.Fatalf("refused events recorded %d fires", len(fires))
	}
	if seen, _ := e.store.SeenEvent(context.Background(), id, "event:e0"); seen {
		t.Error("a refused event's id was recorded")
	}
	r = signedEvent(t, e, id, secret, "e1", body, now)
	if r.Status != 202 || str(r.JSON["status"]) != "queued" {
		t.Fatalf("signed event: %d %v", r.Status, r.JSON)
	}
	if r := signedEvent(t, e, id, secret, "e1", body, now); r.Status != 200 || r.JSON["duplicate"] != true {
		t.Errorf("replay: %d %v", r.Status, r.JSON)
	}
	got := e.fired.all()
	if len(got) != 1 || got[0].AutomationID != id || got[0].Trigger != runtime.TriggerEvent {
		t.Fatalf("fires = %+v", got)
	}
	if f, err := e.store.GetFire(context.Background(), id, got[0].FireTime); err != nil || string(f.Event) != body || f.Trigger != runtime.TriggerEvent {
		t.Fatalf("the fire keeps its event: %+v, %v", f, err)
	}
	runs := e.do("GET", "/api/automations/"+id+"/runs", e.key, nil)
	if list := runs.JSON["runs"].([]any); len(list) != 1 || str(list[0].(map[string]any)["status"]) != "queued" {
		t.Errorf("runs: %s", runs.Body)
	}
	// A paused trigger refuses events with 409; oversized and non-JSON bodies are refused.
	e.do("PATCH", "/api/automations/"+id, e.key, `{"enabled":false}`)
	if r := signedEvent(t, e, id, secret, "e2", body, now); r.Status != 409 {
		t.Errorf("event for a paused automation: %d %v", r.Status, r.JSON)
	}
	e.do("PATCH", "/api/automations/"+id, e.key, `{"enabled":true}`)
	if r := signedEvent(t, e, id, secret, "e3", "not json", now); r.Status != 400 {
		t.Errorf("non-JSON event: %d %v", r.Status, r.JSON)
	}
	big := `{"x":"` + strings.Repeat("a", runtime.MaxEventBytes) + `"}`
	if r := signedEvent(t, e, id, secret, "e4", big, now); r.Status != 413 {
		t.Errorf("event over %d bytes: %d %v", runtime.MaxEventBytes, r.Status, r.JSON)
	}
	edge := `{"x":"` + strings.Repeat("a", runtime.MaxEventBytes-8) + `"}`
	if r := signedEvent(t, e, id, secret, "e5", edge, now); r.Status != 202 {
		t.Errorf("event of exactly %d bytes: %d %v", len(edge), r.Status, r.JSON)
	}
}

// A store write fires the matching store triggers once per written version, with the record.
func TestAutomationStoreTrigger(t *testing.T) {
	e := startAutomations(t)
	open := str(e.do("POST", "/api/automations", e.key, `{"name":"open","trigger":{"store":"tickets","where":{"status":"open"}},"action":{"message":"look"}}`).JSON["id"])
	every := str(e.do("POST", "/api/automations", e.key, `{"name":"all","trigger":{"store":"tickets"},"action":{"tool":"store__tickets__get","params":{"key":"c1-1"}}}`).JSON["id"])
	if open == "" || every == "" {
		t.Fatal("create failed")
	}
	put := func(status string) {
		t.Helper()
		r := e.do("PUT", "/stores/tickets/c1-1", e.key, map[string]any{"customer_id": "c1", "number": 1, "subject": "s", "status": status})
		if r.Status != 200 {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
	}
	put("open")
	put("closed")
	put("open")
	count := map[string]int{}
	for _, f := range e.fired.all() {
		count[f.AutomationID]++
		stored, err := e.store.GetFire(context.Background(), f.AutomationID, f.FireTime)
		var rec map[string]any
		if err != nil || json.Unmarshal(stored.Event, &rec) != nil || rec["store"] != "tickets" || rec["key"] != "c1-1" {
			t.Errorf("fire event = %s, %v", stored.Event, err)
		}
	}
	if count[open] != 2 || count[every] != 3 {
		t.Errorf("fires: open %d (want 2: the two open versions), all %d (want 3)", count[open], count[every])
	}
}

// RunAutomation runs a message action as a turn of a new session owned by the saver, and a tool
// action as one call of the tool with no model; both titled and tagged with the automation.
func TestRunAutomation(t *testing.T) {
	e := startAutomations(t)
	ctx := context.Background()
	msg, err := automations.Decode([]byte(`{"name":"brief","trigger":{"every":"5m"},"action":{"message":"hello there"},"context":{"plan":"annual","n":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	saver := registry.AutomationSaver{UserID: "u1", CredentialKind: "runtime_token"}
	var started string
	res, err := e.rt.RunAutomation(ctx, runtime.AutomationRun{AutomationID: "au_1", Name: "brief", Spec: msg, Saver: saver,
		Trigger: runtime.TriggerEvent, Event: json.RawMessage(`{"k":1}`), Started: func(id string) { started = id }})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID == "" || res.SessionID != started || res.DoneReason != "model_stop" || res.Error != "" {
		t.Fatalf("RunAutomation = %+v (started %q)", res, started)
	}
	s := e.do("GET", "/sessions/history/"+res.SessionID, e.sg.token(agentID, "u1", ""), nil)
	if s.Status != 200 || str(s.JSON["title"]) != "brief" {
		t.Fatalf("the saver reads the run's session: %d %s", s.Status, s.Body)
	}
	if md := s.JSON["metadata"].(map[string]any); md["automation_id"] != "au_1" {
		t.Errorf("metadata = %v", md)
	}
	body := string(s.Body)
	if !strings.Contains(body, `hello there\n\nevent:\n{\"k\":1}`) || !strings.Contains(body, "echo: hello there") {
		t.Errorf("the session does not show the message with its event and the answer: %s", body)
	}
	if r := e.do("GET", "/sessions/history/"+res.SessionID, e.sg.token(agentID, "u2", ""), nil); r.Status != 404 {
		t.Errorf("another user reads the saver's run: %d", r.Status)
	}

	tool, err := automations.Decode([]byte(`{"name":"file","trigger":{"every":"5m"},"action":{"tool":"store__tickets__set","params":{"customer_id":"c9","number":4,"subject":"from an automation","status":"open"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err = e.rt.RunAutomation(ctx, runtime.AutomationRun{AutomationID: "au_2", Name: "file", Spec: tool, Saver: registry.AutomationSaver{}})
	if err != nil || res.DoneReason != "model_stop" {
		t.Fatalf("tool action: %+v, %v", res, err)
	}
	if r := e.do("GET", "/stores/tickets/c9-4", e.key, nil); r.Status != 200 {
		t.Errorf("the tool action did not write the record: %d %s", r.Status, r.Body)
	}
	s = e.do("GET", "/sessions/history/"+res.SessionID, e.key, nil)
	if !strings.Contains(string(s.Body), "store__tickets__set") || strings.Contains(string(s.Body), "echo:") {
		t.Errorf("the tool action's session: %s", s.Body)
	}
	// A bad tool argument is the call's error result, as for a model's call: the run ends.
	bad, _ := automations.Decode([]byte(`{"name":"bad","trigger":{"every":"5m"},"action":{"tool":"store__tickets__set","params":{"customer_id":"c9"}}}`))
	res, err = e.rt.RunAutomation(ctx, runtime.AutomationRun{AutomationID: "au_3", Name: "bad", Spec: bad})
	if err != nil || res.DoneReason != "model_stop" {
		t.Fatalf("bad params: %+v, %v", res, err)
	}
	if s := e.do("GET", "/sessions/history/"+res.SessionID, e.key, nil); !strings.Contains(string(s.Body), "number") {
		t.Errorf("the error result does not name the missing field: %s", s.Body)
	}
}

// Under svc dev (no platform) the routes say where automations run.
func TestAutomationsNeedThePlatform(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	for _, path := range []string{"/api/automations", "/api/automations/au_1", "/api/automations/au_1/runs"} {
		r := e.do("GET", path, "", nil)
		if r.Status != 404 || !strings.Contains(str(r.JSON["message"]), "svc dev") {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := e.do("POST", "/api/automations/au_1/events", "", `{}`); r.Status != 404 {
		t.Errorf("events under svc dev: %d", r.Status)
	}
}

// A run is a trace of its own: its root span carries svc.automation.id, and the turn is a child.
func TestRunAutomationTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(t.Context())
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Tracer: tp.Tracer("svc/runner")})
	spec, err := automations.Decode([]byte(`{"name":"traced","trigger":{"every":"5m"},"action":{"message":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.RunAutomation(t.Context(), runtime.AutomationRun{AutomationID: "au_9", Name: "traced", Spec: spec, Trigger: runtime.TriggerSchedule}); err != nil {
		t.Fatal(err)
	}
	var root, turn sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "svc.automation.run":
			root = s
		case "chat turn":
			turn = s
		}
	}
	if root == nil || turn == nil {
		t.Fatalf("spans: root %v, turn %v", root, turn)
	}
	if root.Parent().IsValid() || turn.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("the run's span is not the root of its turn's")
	}
	found := false
	for _, kv := range root.Attributes() {
		if string(kv.Key) == "svc.automation.id" && kv.Value.AsString() == "au_9" {
			found = true
		}
	}
	if !found {
		t.Errorf("root attributes %v lack svc.automation.id", root.Attributes())
	}
}

// BenchmarkStoreWriteTriggers: a PUT /stores/{store}/{key} on a runtime without automations
// (svc dev), with automations and none of them a store trigger, and with one store trigger that
// matches every write (a fire recorded per version): what store triggers add to a write.
func BenchmarkStoreWriteTriggers(b *testing.B) {
	for _, c := range []string{"no automations", "no store trigger", "one matching trigger"} {
		b.Run(c, func(b *testing.B) {
			keys := newKeys(b)
			key := keys.create(b, agentID)
			opts := runtime.Options{Agent: loadAgent(b, "support-desk"), AgentID: agentID, Keys: keys.checker}
			if c != "no automations" {
				cipher, err := registry.NewCipher([]byte(strings.Repeat("c", registry.SecretKeySize)))
				if err != nil {
					b.Fatal(err)
				}
				opts.Automations = &runtime.Automations{Store: registry.NewStores(keys.db, cipher, nil, nil).Automations, Fire: (&fires{}).fire}
			}
			e := start(b, opts)
			if c == "one matching trigger" {
				if r := e.do("POST", "/api/automations", key, `{"name":"t","trigger":{"store":"tickets"},"action":{"message":"m"}}`); r.Status != 201 {
					b.Fatalf("create: %d %s", r.Status, r.Body)
				}
			}
			body := map[string]any{"customer_id": "c1", "number": 1, "subject": "s", "status": "open"}
			b.ResetTimer()
			for range b.N {
				if r := e.do("PUT", "/stores/tickets/c1-1", key, body); r.Status != 200 {
					b.Fatalf("put: %d %s", r.Status, r.Body)
				}
			}
		})
	}
}
