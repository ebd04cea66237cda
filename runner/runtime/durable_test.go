package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/runtime"
)

// The support-desk refund end to end on one runtime (spec 3.2 row by row, 4.3, 4.4, 6.1, 6.2, 7):
// over 500 EUR the run parks for finance-lead; another user is refused; the answer resumes the
// run, which writes the ticket once; a second answer is refused with who answered; restart runs
// the tool again; cancel ends a parked run; every change reaches GET /api/events.
func TestDurableRefundFlow(t *testing.T) {
	sg := newSigner(t)
	runs := &durable.Memory{}
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), AgentID: agentID, DeployID: "dep_1", Verifier: sg.s, Durable: durableEngine(t, engine.Config{Store: runs})})
	customer, finance, mallory, service := sg.token(agentID, "cust", ""), sg.token(agentID, "finance-lead", ""), sg.token(agentID, "mallory", ""), sg.token(agentID, "", "")

	events, err := e.srv.Client().Do(e.request("GET", "/api/events", service, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	got := make(chan []frame, 1)
	go func() { got <- readFrames(t, events.Body, 5) }()

	fs := e.chat(customer, map[string]any{"message": `/tool refund_request {"customer_id":"c1","amount_eur":900,"reason":"double charge"}`})
	parked := ofType(fs, "durable_approval_required")
	if len(parked) != 1 {
		t.Fatalf("frames %v: want one durable_approval_required", types(fs))
	}
	p := parked[0].Data
	id := str(p["session_id"])
	wantOptions := []any{map[string]any{"value": "approve", "label": "Approve", "recommended": true}, map[string]any{"value": "reject", "label": "Reject"}}
	if !strings.HasPrefix(id, "dur_") || p["tool_name"] != "refund_request" || p["question"] != "Approve a refund of 900 EUR for c1?" ||
		!cmp.Equal(p["options"], wantOptions) || p["allow_edits"] != true {
		t.Errorf("durable_approval_required = %v", p)
	}
	res := ofType(fs, "tool_call_result")[0].Data
	if r, _ := res["result"].(map[string]any); res["status"] != "success" || r["session_id"] != id || r["status"] != "awaiting-input" {
		t.Errorf("the model's asynchronous-start result = %v", res)
	}
	if d := done(t, fs); d["reason"] != "model_stop" {
		t.Errorf("the turn did not go on: %v", d)
	}
	if id == sessionOf(t, fs) {
		t.Errorf("the durable session has the chat session's id")
	}

	// Who may answer sees it pending; nobody else does.
	for _, c := range []struct {
		who, token string
		n          int
	}{{"finance-lead", finance, 1}, {"mallory", mallory, 0}, {"the customer", customer, 0}, {"a service", service, 0}} {
		r := e.do("GET", "/sessions/pending-approvals", c.token, nil)
		if list, _ := r.JSON["sessions"].([]any); r.Status != 200 || len(list) != c.n {
			t.Errorf("pending approvals of %s: %d %s", c.who, r.Status, r.Body)
		}
	}
	pending := e.do("GET", "/sessions/pending-approvals", finance, nil).JSON["sessions"].([]any)[0].(map[string]any)
	pause := pending["pause"].(map[string]any)
	if pending["session_id"] != id || pending["status"] != "awaiting-input" || pending["deploy_id"] != "dep_1" || pending["parent_session_id"] != sessionOf(t, fs) ||
		pause["kind"] != "input" || pause["input_type"] != "choice" || !cmp.Equal(pause["eligible_answerers"], []any{"finance-lead"}) || pause["allow_edits"] != true {
		t.Errorf("pending record = %v", pending)
	}

	answer := func(token string, body map[string]any) *response {
		return e.do("POST", "/api/sessions/"+id+"/answer", token, body)
	}
	if r := answer(mallory, map[string]any{"value": "approve"}); r.Status != 404 || r.JSON["error"] != "not_found" {
		t.Errorf("mallory's answer to a run she cannot see: %d %s, want 404 (CONTRACT §8)", r.Status, r.Body)
	}
	if r := answer(service, map[string]any{"value": "approve"}); r.Status != 403 || r.JSON["error"] != "not_eligible_answerer" {
		t.Errorf("a service's answer to a pause with eligible answerers: %d %s", r.Status, r.Body)
	}
	for _, bad := range []map[string]any{{"value": "maybe"}, {"value": true}, {}, {"value": []any{}}} {
		if r := answer(finance, bad); r.Status != 400 || r.JSON["field"] != "value" {
			t.Errorf("answer %v: %d %s", bad, r.Status, r.Body)
		}
	}
	if r := e.do("POST", "/api/sessions/dur_nope/answer", finance, map[string]any{"value": "approve"}); r.Status != 404 {
		t.Errorf("answer to no session: %d %s", r.Status, r.Body)
	}
	// The answer is taken at once; the run goes on in the background.
	r := answer(finance, map[string]any{"value": "approve", "edits": map[string]any{"amount_eur": 800}})
	if r.Status != 200 || r.JSON["status"] != "running" || r.JSON["answered_by"] != "finance-lead" || r.JSON["pause"] != nil {
		t.Fatalf("answer: %d %s", r.Status, r.Body)
	}
	if r := answer(finance, map[string]any{"value": "approve"}); r.Status != 409 || r.JSON["error"] != "session_not_awaiting_input" || r.JSON["answeredBy"] != "finance-lead" {
		t.Errorf("second answer: %d %s", r.Status, r.Body)
	}
	r = e.waitRecord(finance, id, "completed")
	result, _ := r.JSON["result"].(map[string]any)
	if r.JSON["answered_by"] != "finance-lead" || result["status"] != "refunded" || result["approvedBy"] != "finance-lead" {
		t.Fatalf("the answered run: %s", r.Body)
	}
	if r := e.do("GET", "/stores/tickets/c1-0", service, nil); r.Status != 200 || num(r.JSON["version"]) != 1 {
		t.Errorf("the ticket: %d %s; want written once", r.Status, r.Body)
	}
	if r := e.do("GET", "/api/sessions/"+id, customer, nil); r.Status != 200 || r.JSON["status"] != "completed" || r.JSON["answered_by"] != "finance-lead" {
		t.Errorf("GET by the owner: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/api/sessions/"+id, finance, nil); r.Status != 200 {
		t.Errorf("GET by who answered: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/api/sessions/"+id, mallory, nil); r.Status != 404 {
		t.Errorf("GET by another user: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/api/sessions/"+id+"/cancel", finance, nil); r.Status != 409 {
		t.Errorf("cancel of a completed run: %d %s", r.Status, r.Body)
	}

	// Restart runs the tool again as a new session, which parks again; cancel ends it.
	r = e.do("POST", "/api/sessions/"+id+"/restart", customer, nil)
	again := str(r.JSON["session_id"])
	if r.Status != 200 || again == id || r.JSON["status"] != "awaiting-input" || r.JSON["tool_name"] != "refund_request" {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/api/sessions/"+again+"/restart", mallory, nil); r.Status != 404 {
		t.Errorf("restart by another user: %d %s", r.Status, r.Body)
	}
	r = e.do("POST", "/api/sessions/"+again+"/cancel", customer, nil)
	if r.Status != 200 || r.JSON["status"] != "cancelled" {
		t.Errorf("cancel: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/api/sessions/"+again+"/answer", finance, map[string]any{"value": "approve"}); r.Status != 409 {
		t.Errorf("answer of a cancelled run: %d %s", r.Status, r.Body)
	}

	select {
	case fs := <-got:
		var seen []string
		for _, f := range fs {
			if f.typ() != "session_updated" || f.Data["tool_name"] != "refund_request" {
				t.Errorf("event %v", f.Data)
			}
			seen = append(seen, str(f.Data["session_id"])[:4]+" "+str(f.Data["status"]))
		}
		want := []string{"dur_ awaiting-input", "dur_ running", "dur_ completed", "dur_ awaiting-input", "dur_ cancelled"}
		if !cmp.Equal(seen, want) {
			t.Errorf("events %q, want %q", seen, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no events")
	}
}

// durableAgent is an agent with one durable tool "flow" of the given handler.
func durableAgent(t testing.TB, handler string) *agent.Agent {
	t.Helper()
	a, err := agent.Load(fstest.MapFS{
		"svc.json":                  {Data: []byte(`{"name": "flows", "version": "1", "models": {"main": {"provider": "echo", "model": "echo"}}}`)},
		"agents/default/AGENT.md":   {Data: []byte("# Flows\n\nRun flows.\n")},
		"agents/default/agent.json": {Data: []byte(`{"name": "default", "tools": ["flow"]}`)},
		"svc/tools/flow/tool.json": {Data: []byte(`{"name": "flow", "description": "a flow", "execution": "durable",
			"parameters": {"type": "object", "properties": {}}, "uses": {"tools": [], "subagents": []}}`)},
		"svc/tools/flow/handler.ts": {Data: []byte(handler)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// waitRecord polls GET /api/sessions/{id} until the run's status is want and returns that
// answer: how a client follows an answered run.
func (e *env) waitRecord(token, id, want string) *response {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.do("GET", "/api/sessions/"+id, token, nil)
		if r.Status == 200 && r.JSON["status"] == want {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("GET %s: %d %s; want status %s", id, r.Status, r.Body, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRun polls a run of svc dev (no agent) until its status is want.
func waitRun(t *testing.T, runs durable.Store, id, want string) durable.Run {
	t.Helper()
	return waitRunOf(t, runs, "", id, want)
}

// waitRunOf polls a run of agentID until its status is want.
func waitRunOf(t *testing.T, runs durable.Store, agentID, id, want string) durable.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		run, err := runs.Get(t.Context(), agentID, id)
		if err == nil && run.Status == want {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s (%v), want %s", id, run.Status, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startFlow runs the flow tool in a chat and returns its durable session id.
func startFlow(t *testing.T, e *env) string {
	t.Helper()
	fs := e.chat("", map[string]any{"message": `/tool flow {}`})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 {
		t.Fatalf("frames %v", types(fs))
	}
	var r map[string]any
	_ = json.Unmarshal([]byte(str(res[0].Data["content"])), &r)
	if str(r["session_id"]) == "" {
		t.Fatalf("no durable session in %v", res[0].Data)
	}
	return str(r["session_id"])
}

// A sleeping run wakes by itself (svc dev: a timer of the process) and completes.
func TestDurableSleep(t *testing.T) {
	runs := &durable.Memory{}
	e := start(t, runtime.Options{Agent: durableAgent(t, `export default async function (p: any, ctx: any) {
  await ctx.sleepUntil(ctx.now() + 1000);
  return "slept";
}`), Durable: durableEngine(t, engine.Config{Store: runs})})
	id := startFlow(t, e)
	if run, _ := runs.Get(t.Context(), "", id); run.Status != durable.Sleeping || run.Pause.WakeAt == nil {
		t.Fatalf("run = %+v", run)
	}
	if r := e.do("POST", "/api/sessions/"+id+"/answer", "", map[string]any{"value": "x"}); r.Status != 409 {
		t.Errorf("answer of a sleeping run: %d %s", r.Status, r.Body)
	}
	if run := waitRun(t, runs, id, durable.Completed); string(run.Result) != `"slept"` {
		t.Errorf("result %s", run.Result)
	}
}

// An unanswered pause times out as its onTimeout says: deny, a default, or escalate to other
// answerers, whose own timeout then denies; the expiry is journaled like an answer.
func TestDurableTimeouts(t *testing.T) {
	cases := []struct {
		name, opts, want string
	}{
		{"deny", `timeout: 1000`, `{"value":null,"by":"timeout"}`},
		{"default", `timeout: "1s", onTimeout: {default: "b"}`, `{"value":"b","by":"timeout"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs := &durable.Memory{}
			e := start(t, runtime.Options{Agent: durableAgent(t, `export default async function (p: any, ctx: any) {
  const a = await ctx.requestInput({question: "which?", options: [{value: "a", label: "A"}, {value: "b", label: "B"}], `+c.opts+`});
  return {value: a.value, by: a.respondedBy};
}`), Durable: durableEngine(t, engine.Config{Store: runs})})
			id := startFlow(t, e)
			if run := waitRun(t, runs, id, durable.Completed); string(run.Result) != c.want {
				t.Errorf("result %s, want %s", run.Result, c.want)
			}
		})
	}
	t.Run("escalate", func(t *testing.T) {
		sg := newSigner(t)
		runs := &durable.Memory{}
		e := start(t, runtime.Options{Agent: durableAgent(t, `export default async function (p: any, ctx: any) {
  const ok = await ctx.waitForApproval({question: "ship it?", eligibleAnswerers: ["ana"], timeout: 1000, onTimeout: {escalate: ["cfo"], timeout: 60000}});
  return ok;
}`), AgentID: agentID, Verifier: sg.s, Durable: durableEngine(t, engine.Config{Store: runs})})
		fs := e.chat(sg.token(agentID, "", ""), map[string]any{"message": `/tool flow {}`})
		id := str(ofType(fs, "durable_approval_required")[0].Data["session_id"])
		deadline := time.Now().Add(20 * time.Second)
		for {
			run, _ := runs.Get(t.Context(), agentID, id)
			if run.Pause != nil && cmp.Equal(run.Pause.EligibleAnswerers, []string{"cfo"}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not escalated: %+v", run)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if r := e.do("POST", "/api/sessions/"+id+"/answer", sg.token(agentID, "ana", ""), map[string]any{"value": true}); r.Status != 403 {
			t.Errorf("the first answerer after escalation: %d %s", r.Status, r.Body)
		}
		cfo := sg.token(agentID, "cfo", "")
		if r := e.do("POST", "/api/sessions/"+id+"/answer", cfo, map[string]any{"value": map[string]any{"approved": true, "note": "fine"}}); r.Status != 200 {
			t.Fatalf("cfo's answer: %d %s", r.Status, r.Body)
		}
		if r := e.waitRecord(cfo, id, "completed"); string(mustJSON(t, r.JSON["result"])) != `{"approved":true,"note":"fine","respondedBy":"cfo"}` {
			t.Errorf("the run cfo answered: %s", r.Body)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A durable execution that runs past its deadline fails the run, naming the deadline; without a
// persistent store (svc dev) a parked run is gone with its runtime (spec 4.7 rule 8).
func TestDurableDeadlineAndMemoryStore(t *testing.T) {
	runs := &durable.Memory{}
	e := start(t, runtime.Options{Agent: durableAgent(t, `export default async function (p: any, ctx: any) {
  await ctx.step("a", () => 1);
  while (true) {}
}`), Durable: durableEngine(t, engine.Config{Store: runs, HandlerTimeout: time.Second}), HandlerTimeout: time.Second})
	fs := e.chat("", map[string]any{"message": `/tool flow {}`})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 || res[0].Data["status"] != "error" || !strings.Contains(str(res[0].Data["error"]), "ran past its 1s deadline") {
		t.Fatalf("result %v", res)
	}
	list, _ := runs.List(t.Context(), durable.Filter{})
	if len(list) != 1 || list[0].Status != durable.Failed || !strings.Contains(list[0].Error, "deadline") {
		t.Errorf("runs %+v", list)
	}

	parking := durableAgent(t, `export default async (p: any, ctx: any) => ctx.waitForApproval("ok?");`)
	first := start(t, runtime.Options{Agent: parking})
	id := startFlow(t, first)
	second := start(t, runtime.Options{Agent: parking})
	if r := second.do("POST", "/api/sessions/"+id+"/answer", "", map[string]any{"value": true}); r.Status != 404 {
		t.Errorf("answer on a runtime with its own memory store: %d %s", r.Status, r.Body)
	}
	if r := first.do("POST", "/api/sessions/"+id+"/answer", "", map[string]any{"value": true}); r.Status != 200 {
		t.Fatalf("answer on the runtime that holds it: %d %s", r.Status, r.Body)
	}
	first.waitRecord("", id, "completed")
}
