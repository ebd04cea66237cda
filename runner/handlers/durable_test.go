package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/durable"
	"svc/runner/handlers"
	"svc/runner/models"
	"svc/runner/sse"
	"svc/runner/tools"
)

// journal is an in-memory Journal that counts its writes.
type journal struct {
	mu      sync.Mutex
	entries map[string]json.RawMessage
	order   []string
	fail    error
	now     time.Time
}

func newJournal() *journal {
	return &journal{entries: map[string]json.RawMessage{}, now: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
}

// for an execution: a snapshot of the entries, as a fresh process would read them.
func (j *journal) handlers() *handlers.Journal {
	j.mu.Lock()
	defer j.mu.Unlock()
	rec := make(map[string]json.RawMessage, len(j.entries))
	for k, v := range j.entries {
		rec[k] = v
	}
	return &handlers.Journal{Recorded: rec, Now: func() time.Time { return j.now },
		Record: func(_ context.Context, key string, value json.RawMessage) error {
			j.mu.Lock()
			defer j.mu.Unlock()
			if j.fail != nil {
				return j.fail
			}
			if _, ok := j.entries[key]; ok {
				return durable.ErrRecorded
			}
			j.entries[key] = value
			j.order = append(j.order, key)
			return nil
		}}
}

// answer records the answer of a pause, as the runtime does.
func (j *journal) answer(key, value string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries[key] = json.RawMessage(value)
	j.order = append(j.order, key)
}

// durableTool compiles handler ts as durable tool "d" with the given uses, and the files of
// others (path → content) beside it.
func durableTool(tb testing.TB, ts, uses string, opts handlers.Options, others map[string]string) (*handlers.Tool, map[string]*agent.Tool) {
	tb.Helper()
	fsys := fstest.MapFS{
		"svc.json":                  {Data: []byte(`{"name": "t", "version": "1"}`)},
		"agents/default/AGENT.md":   {Data: []byte("# T\n\nBe brief.\n")},
		"agents/default/agent.json": {Data: []byte(`{"name": "default"}`)},
		"svc/tools/d/tool.json": {Data: []byte(`{"name": "d", "description": "durable", "execution": "durable",
			"parameters": {"type": "object", "properties": {"n": {"type": "number"}}}, "uses": ` + uses + `}`)},
		"svc/tools/d/handler.ts": {Data: []byte(ts)},
	}
	for path, src := range others {
		fsys[path] = &fstest.MapFile{Data: []byte(src)}
	}
	a, err := agent.Load(fsys)
	if err != nil {
		tb.Fatalf("agent.Load: %v", err)
	}
	h, err := handlers.New(a.Tools["d"], sandboxed(opts))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return h, a.Tools
}

func run(t *testing.T, h *handlers.Tool, j *journal, host tools.Host) (tools.Result, *durable.Pause, error) {
	t.Helper()
	return h.RunDurable(t.Context(), call(`{"n": 1}`, host), j.handlers())
}

// logs are the tool_log messages of rec.
func logs(rec *recorder) []string {
	var out []string
	for _, f := range rec.frames {
		if f.Type == sse.TypeToolLog {
			out = append(out, f.Message)
		}
	}
	return out
}

// A step runs once: on replay it returns its record without calling fn; repeated names are
// told apart by call order; dates come back as ISO strings and class instances as plain
// objects; a step that throws records nothing and runs again.
func TestStep(t *testing.T) {
	h, _ := durableTool(t, `
class Point { constructor(public x: number) {} get double() { return this.x * 2; } }
export default async function (p: any, ctx: any) {
  const a = await ctx.step("s", async () => { console.log("a runs"); await null; return 1; });
  const b = await ctx.step("s", () => { console.log("b runs"); return 2; });
  const d = await ctx.step("date", () => new Date(Date.UTC(2026, 0, 2, 3, 4, 5)));
  const pt = await ctx.step("point", () => new Point(3));
  const u = await ctx.step("nothing", () => undefined);
  let tries = 0;
  try { await ctx.step("flaky", () => { tries++; throw new Error("not yet"); }); } catch (e) { console.log("caught " + e.message); }
  const answer = await ctx.waitForApproval("go on?");
  return { a, b, d, dateType: typeof d, pt, ptType: pt instanceof Point, u, tries, approved: answer.approved };
}`, `{"tools": [], "subagents": []}`, handlers.Options{}, nil)
	j := newJournal()
	rec := &recorder{}
	_, pause, err := run(t, h, j, rec)
	if err != nil || pause == nil {
		t.Fatalf("first run: pause %+v, err %v", pause, err)
	}
	if got, want := logs(rec), []string{"a runs", "b runs", "caught not yet"}; !cmp.Equal(got, want) {
		t.Errorf("first run logs %q, want %q", got, want)
	}
	if want := []string{"step:s#1", "step:s#2", "step:date#1", "step:point#1", "step:nothing#1"}; !cmp.Equal(j.order, want) {
		t.Errorf("journal %q, want %q", j.order, want)
	}
	j.answer(pause.Key, `{"approved": true, "respondedBy": "ana"}`)
	rec = &recorder{}
	res, pause, err := run(t, h, j, rec)
	if err != nil || pause != nil {
		t.Fatalf("replay: pause %+v, err %v", pause, err)
	}
	if got, want := logs(rec), []string{"caught not yet"}; !cmp.Equal(got, want) {
		t.Errorf("replay logs %q, want %q (recorded steps must not run)", got, want)
	}
	want := `{"a":1,"b":2,"d":"2026-01-02T03:04:05.000Z","dateType":"string","pt":{"x":3},"ptType":false,"u":null,"tries":1,"approved":true}`
	if string(res.Data) != want {
		t.Errorf("result %s\nwant   %s", res.Data, want)
	}
}

// ctx.now and ctx.random are recorded: a replay sees the same values, whatever the clock says.
func TestNowAndRandom(t *testing.T) {
	h, _ := durableTool(t, `export default async function (p: any, ctx: any) {
  const t = ctx.now(), r = ctx.random(), t2 = ctx.now();
  await ctx.waitForApproval("ok?");
  return { t, r, t2, inRange: r >= 0 && r < 1 };
}`, `{}`, handlers.Options{}, nil)
	j := newJournal()
	_, pause, err := run(t, h, j, nil)
	if err != nil || pause == nil {
		t.Fatalf("first run: %v", err)
	}
	first := j.entries["random#1"]
	j.now = j.now.Add(48 * time.Hour)
	j.answer(pause.Key, `{"approved": false}`)
	res, _, err := run(t, h, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		T, T2   int64
		R       json.RawMessage
		InRange bool
	}
	if err := json.Unmarshal(res.Data, &got); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC).UnixMilli()
	if got.T != start || got.T2 != start || string(got.R) != string(first) || !got.InRange {
		t.Errorf("replayed %s; want now %d twice and random %s", res.Data, start, first)
	}
}

// requestInput parks with every option of spec 4.7, the handler cannot catch the pause, and the
// recorded answer is what it returns on replay.
func TestRequestInput(t *testing.T) {
	h, _ := durableTool(t, `export default async function (p: any, ctx: any) {
  let a;
  try {
    a = await ctx.requestInput({
      question: "Refund?", context: "order 7", inputType: "choice",
      options: [{ value: "yes", label: "Yes", recommended: true }, { value: "no", label: "No", sub: "keep it" }],
      payload: { amount: 900 }, allowEdits: true, eligibleAnswerers: ["finance-lead"], excludeAnswerers: ["bob"],
      timeout: "48h", onTimeout: { escalate: ["cfo"], timeout: 3600000 },
    });
  } catch (e) {
    console.log("caught a pause");
    return "caught";
  } finally {
    console.log("finally");
  }
  return a;
}`, `{}`, handlers.Options{}, nil)
	j := newJournal()
	rec := &recorder{}
	_, pause, err := run(t, h, j, rec)
	if err != nil || pause == nil {
		t.Fatalf("pause %+v, err %v", pause, err)
	}
	if l := logs(rec); len(l) != 0 {
		t.Errorf("the handler saw its pause: logs %q", l)
	}
	expires := j.now.Add(48 * time.Hour)
	want := &durable.Pause{Kind: durable.PauseInput, Key: "input#1", Question: "Refund?", Context: "order 7", InputType: "choice",
		Options: json.RawMessage(`[{"value":"yes","label":"Yes","recommended":true},{"value":"no","label":"No","sub":"keep it"}]`),
		Payload: json.RawMessage(`{"amount":900}`), AllowEdits: true, EligibleAnswerers: []string{"finance-lead"}, ExcludeAnswerers: []string{"bob"},
		ExpiresAt: &expires, OnTimeout: json.RawMessage(`{"action":"escalate","to":["cfo"],"timeout_ms":3600000}`)}
	if diff := cmp.Diff(want, pause, cmp.Comparer(func(a, b json.RawMessage) bool { return string(a) == string(b) })); diff != "" {
		t.Errorf("pause (-want +got):\n%s", diff)
	}
	j.answer("input#1", `{"value": "yes", "respondedBy": "finance-lead", "edits": {"amount": 800}}`)
	res, pause, err := run(t, h, j, nil)
	if err != nil || pause != nil || string(res.Data) != `{"value":"yes","respondedBy":"finance-lead","edits":{"amount":800}}` {
		t.Errorf("replay = %s, %+v, %v", res.Data, pause, err)
	}
}

// Bad options are thrown into the handler, naming the option.
func TestRequestInputErrors(t *testing.T) {
	tests := map[string]string{
		`{question: "q", inputType: "number"}`:                                       `inputType must be "text", "choice" or "yesno", not "number"`,
		`{question: "q", inputType: "choice"}`:                                       `options are required for inputType "choice"`,
		`{question: "q", options: [{label: "x"}]}`:                                   `options[0] needs a value`,
		`{question: "q", options: [{value: 1}]}`:                                     `options[0] needs a label`,
		`{question: "q", options: [{value: 1, label: "a"}, {value: 1, label: "b"}]}`: `options[1]: value 1 is given twice`,
		`{question: "q", colour: "red"}`:                                             `options: unknown field "colour"`,
		`{inputType: "text"}`:                                                        `needs a question`,
		`{question: "q", timeout: "soon"}`:                                           `timeout: "soon" is not a duration`,
		`{question: "q", timeout: 10}`:                                               `timeout: 10ms is shorter than a second`,
		`{question: "q", onTimeout: "deny"}`:                                         `onTimeout needs a timeout`,
		`{question: "q", timeout: "1h", onTimeout: "explode"}`:                       `onTimeout must be "deny"`,
		`{question: "q", timeout: "1h", onTimeout: {escalate: []}}`:                  `onTimeout.escalate must be a non-empty list`,
		`"just a string"`:                                                            `needs an options object`,
		`{question: "q", eligibleAnswerers: [""]}`:                                   `eligibleAnswerers[0] is empty`,
	}
	for opts, want := range tests {
		h, _ := durableTool(t, "export default async (p: any, ctx: any) => ctx.requestInput("+opts+");\n", `{}`, handlers.Options{}, nil)
		_, pause, err := run(t, h, newJournal(), nil)
		if pause != nil || err == nil || !strings.Contains(err.Error(), "ctx.requestInput "+want) {
			t.Errorf("requestInput(%s): pause %v, err %v; want %q", opts, pause, err, want)
		}
	}
}

// sleepUntil parks until a future time, passes a past one, and returns once woken.
func TestSleepUntil(t *testing.T) {
	h, _ := durableTool(t, `export default async function (p: any, ctx: any) {
  ctx.sleepUntil(new Date(0));
  ctx.sleepUntil("2020-01-01T00:00:00Z");
  await ctx.sleepUntil(ctx.now() + 3600 * 1000);
  return "woke";
}`, `{}`, handlers.Options{}, nil)
	j := newJournal()
	_, pause, err := run(t, h, j, nil)
	wake := j.now.Add(time.Hour)
	if err != nil || pause == nil || pause.Kind != durable.PauseSleep || pause.Key != "sleep#3" || !pause.WakeAt.Equal(wake) {
		t.Fatalf("pause %+v, err %v; want sleep#3 until %s", pause, err, wake)
	}
	j.answer("sleep#3", `{"woke_at": "x"}`)
	res, pause, err := run(t, h, j, nil)
	if err != nil || pause != nil || res.Content != "woke" {
		t.Errorf("after the wake-up: %q, %+v, %v", res.Content, pause, err)
	}
	bad, _ := durableTool(t, `export default async (p: any, ctx: any) => ctx.sleepUntil("tomorrow");`, `{}`, handlers.Options{}, nil)
	if _, _, err := run(t, bad, newJournal(), nil); err == nil || !strings.Contains(err.Error(), `ctx.sleepUntil "tomorrow" is not an ISO 8601 time`) {
		t.Errorf("bad time: %v", err)
	}
}

// Child tools and subagents of a durable handler are journaled (rule 5), may be connection or
// confirming tools (rule 4: no confirmation in durable execution), must be declared (rule 1);
// ctx.request and ctx.store do not exist (rule 6).
func TestDurableChildren(t *testing.T) {
	var mu sync.Mutex
	childCalls, agentCalls := 0, 0
	child := &countingTool{name: "request", calls: func() { mu.Lock(); childCalls++; mu.Unlock() }}
	opts := handlers.Options{
		Children: func(name string) (tools.Tool, error) { return child, nil },
		Subagent: func(context.Context, string, string, json.RawMessage, []tools.Attachment, tools.Call) (string, error) {
			mu.Lock()
			agentCalls++
			mu.Unlock()
			return "billing says yes", nil
		},
	}
	tree := map[string]string{
		"svc/connections/crm/spec.json": `{"baseUrl": "https://crm.example", "format": "rest"}`,
		"agents/billing/AGENT.md":       "# Billing\n\nAnswer yes or no.\n",
		"agents/billing/agent.json":     `{"name": "billing"}`,
	}
	h, _ := durableTool(t, `export default async function (p: any, ctx: any) {
  const r = await ctx.callTool("request", { connection: "crm", method: "POST", path: "/refunds", intent: "write" });
  const s = await ctx.callSubagent("billing", "is it money?");
  const ok = await ctx.waitForApproval("go?");
  return { r, s, ok: ok.approved };
}`, `{"tools": ["request"], "subagents": ["billing"]}`, opts, tree)
	j := newJournal()
	if _, pause, err := run(t, h, j, nil); err != nil || pause == nil {
		t.Fatalf("first run: %v", err)
	}
	j.answer("approval#1", `{"approved": true}`)
	res, _, err := run(t, h, j, nil)
	if err != nil || string(res.Data) != `{"r":{"status":201},"s":"billing says yes","ok":true}` {
		t.Errorf("replay = %s, %v", res.Data, err)
	}
	if childCalls != 1 || agentCalls != 1 || !child.approvalSkipped {
		t.Errorf("child ran %d times, subagent %d, approval skipped %v; want once, once, true", childCalls, agentCalls, child.approvalSkipped)
	}
	for src, want := range map[string]string{
		`ctx.callTool("other", {})`:      `ctx.callTool("other") is not allowed: other is not in uses.tools of d`,
		`ctx.callSubagent("legal", "x")`: `ctx.callSubagent("legal") is not allowed: legal is not in uses.subagents of d`,
		`ctx.request("GET", "/x")`:       `ctx.request is not available in a durable tool`,
		`ctx.store.get("k")`:             `ctx.store is not available in a durable tool`,
	} {
		h, _ := durableTool(t, "export default async (p: any, ctx: any) => "+src+";\n", `{"tools": ["request"], "subagents": ["billing"]}`, opts, tree)
		if _, _, err := run(t, h, newJournal(), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// countingTool is a child that says it needs approval (as a connection write would).
type countingTool struct {
	name            string
	calls           func()
	approvalSkipped bool
}

func (c *countingTool) Spec() models.ToolSpec { return models.ToolSpec{Name: c.name} }
func (c *countingTool) NeedsApproval(context.Context, tools.Call) (*tools.ApprovalRequest, error) {
	return &tools.ApprovalRequest{Endpoint: "/refunds", Method: "POST"}, nil
}
func (c *countingTool) Call(context.Context, tools.Call) (tools.Result, error) {
	c.calls()
	c.approvalSkipped = true
	return tools.Result{Data: json.RawMessage(`{"status":201}`)}, nil
}

// A journal write that fails (another executor claimed the run) ends the execution at once,
// whatever the handler's try/catch says.
func TestRecordFailureStops(t *testing.T) {
	h, _ := durableTool(t, `export default async function (p: any, ctx: any) {
  try { await ctx.step("a", () => 1); } catch (e) { console.log("caught"); }
  console.log("went on");
  return 1;
}`, `{}`, handlers.Options{}, nil)
	j := newJournal()
	j.fail = durable.ErrStale
	rec := &recorder{}
	_, pause, err := run(t, h, j, rec)
	if pause != nil || !errors.Is(err, durable.ErrStale) || len(logs(rec)) != 0 {
		t.Errorf("pause %v, err %v, logs %q; want ErrStale and no logs", pause, err, logs(rec))
	}
}

// Durable-only methods throw in an inline handler, naming what makes a tool durable.
func TestDurableOnlyMethods(t *testing.T) {
	for _, m := range []string{"step(\"a\", () => 1)", "now()", "random()", "requestInput({question: \"q\"})", "waitForApproval(\"q\")", "sleepUntil(0)"} {
		h := newTool(t, "export default async (p: any, ctx: any) => ctx."+m+";\n", handlers.Options{})
		_, err := h.Call(t.Context(), call(`{}`, nil))
		if err == nil || !strings.Contains(err.Error(), `is only available in a durable tool ("execution": "durable" in tool.json)`) {
			t.Errorf("ctx.%s in an inline tool: %v", m, err)
		}
	}
}

// The support-desk refund: under 500 EUR it completes at once and writes the ticket; over 500
// EUR it waits for finance-lead, then writes the ticket once, on the replay.
func TestSupportDeskRefund(t *testing.T) {
	a, err := agent.LoadDir(agenttest.Dir(t, "support-desk"))
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	set := &setTool{written: func() { writes++ }}
	h, err := handlers.New(a.Tools["refund_request"], sandboxed(handlers.Options{Children: func(string) (tools.Tool, error) { return set, nil }}))
	if err != nil {
		t.Fatal(err)
	}
	j := newJournal()
	c := call(`{"customer_id": "c1", "amount_eur": 900, "reason": "double charge"}`, nil)
	_, pause, err := h.RunDurable(t.Context(), c, j.handlers())
	if err != nil || pause == nil || pause.Question != "Approve a refund of 900 EUR for c1?" || !cmp.Equal(pause.EligibleAnswerers, []string{"finance-lead"}) || writes != 0 {
		t.Fatalf("pause %+v, err %v, writes %d", pause, err, writes)
	}
	j.answer(pause.Key, `{"value": "approve", "respondedBy": "finance-lead"}`)
	res, pause, err := h.RunDurable(t.Context(), c, j.handlers())
	if err != nil || pause != nil || writes != 1 || !strings.Contains(string(res.Data), `"status":"refunded","amount_eur":900,"approvedBy":"finance-lead","requestedAt":"2026-11-24T09:00:00.000Z"`) {
		t.Errorf("after the answer: %s, %+v, %v, writes %d", res.Data, pause, err, writes)
	}
	// A replay of the completed run (a crash before its end was stored) writes nothing again.
	if _, _, err := h.RunDurable(t.Context(), c, j.handlers()); err != nil || writes != 1 {
		t.Errorf("second replay: %v, writes %d", err, writes)
	}
}

type setTool struct{ written func() }

func (s *setTool) Spec() models.ToolSpec { return models.ToolSpec{Name: "store__tickets__set"} }
func (s *setTool) Call(_ context.Context, c tools.Call) (tools.Result, error) {
	s.written()
	return tools.Result{Data: json.RawMessage(`{"key":"c1-0","version":1}`)}, nil
}

// A durable handler flushes its journal before every child call, whose effects reach outside
// the run: the child runs only once what the handler did before it is durable.
func TestFlushBeforeChildCalls(t *testing.T) {
	var log []string
	child := &funcChild{call: func() { log = append(log, "child") }}
	h, _ := durableTool(t, `export default async function (p: any, ctx: any) {
  await ctx.step("a", () => 1);
  ctx.now();
  await ctx.callTool("x", {});
  await ctx.step("b", () => 2);
  return "ok";
}`, `{"tools": ["x"]}`, handlers.Options{Children: func(string) (tools.Tool, error) { return child, nil }},
		map[string]string{"svc/tools/x/tool.json": `{"name": "x", "parameters": {"type": "object"}}`, "svc/tools/x/handler.ts": "export default async () => 1;\n"})
	var pending []string
	j := &handlers.Journal{Recorded: map[string]json.RawMessage{},
		Record: func(_ context.Context, key string, _ json.RawMessage) error {
			pending = append(pending, key)
			return nil
		},
		Flush: func(context.Context) error {
			if len(pending) > 0 {
				log = append(log, "flush "+strings.Join(pending, ","))
				pending = nil
			}
			return nil
		}}
	if _, _, err := h.RunDurable(t.Context(), call(`{}`, nil), j); err != nil {
		t.Fatal(err)
	}
	if want := []string{"flush step:a#1,now#1", "child"}; !cmp.Equal(log, want) {
		t.Errorf("order %q, want %q", log, want)
	}
	if !cmp.Equal(pending, []string{"tool:x#1", "step:b#1"}) {
		t.Errorf("left for the caller to write: %q", pending)
	}
	// A flush that fails (another executor took the run) stops the handler before the child.
	log = nil
	j.Flush = func(context.Context) error { return durable.ErrStale }
	if _, _, err := h.RunDurable(t.Context(), call(`{}`, nil), j); !errors.Is(err, durable.ErrStale) || len(log) != 0 {
		t.Errorf("failed flush: %v, log %q", err, log)
	}
}

type funcChild struct{ call func() }

func (f *funcChild) Spec() models.ToolSpec { return models.ToolSpec{Name: "x"} }
func (f *funcChild) Call(context.Context, tools.Call) (tools.Result, error) {
	f.call()
	return tools.Result{Content: "done"}, nil
}
