package runtime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/approvals"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/memstore"
	"svc/runner/tools"
)

// guarded is a host tool whose every call needs the user's approval; it counts the calls made.
type guardedTool struct {
	name  string
	calls atomic.Int32
}

func (g *guardedTool) Spec() models.ToolSpec {
	return models.ToolSpec{Name: g.name, Description: "Refunds an order.", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (g *guardedTool) NeedsApproval(context.Context, tools.Call) (*tools.ApprovalRequest, error) {
	return &tools.ApprovalRequest{Endpoint: "/refunds", Method: "POST", Reason: "refunds move money", Connection: "billing"}, nil
}

func (g *guardedTool) Call(context.Context, tools.Call) (tools.Result, error) {
	g.calls.Add(1)
	return tools.Result{Content: "refunded"}, nil
}

// stream is a chat stream read frame by frame.
type stream struct {
	t    testing.TB
	resp *http.Response
	rd   *bufio.Reader
	all  []frame
	stop context.CancelFunc
}

func (e *env) open(t *testing.T, body map[string]any) *stream { return openB(t, e, body) }

func openB(t testing.TB, e *env, body map[string]any) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := e.request("POST", "/chat/stream", "", body).WithContext(ctx)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return &stream{t: t, resp: resp, rd: bufio.NewReader(resp.Body), stop: cancel}
}

// until reads frames up to and including the first of type typ, and returns it.
func (s *stream) until(typ string) frame {
	s.t.Helper()
	for {
		var f frame
		for {
			line, err := s.rd.ReadString('\n')
			if err != nil {
				s.t.Fatalf("stream ended before %s: %v; frames %v", typ, err, types(s.all))
			}
			line = strings.TrimRight(line, "\n")
			if line == "" && f.Raw != "" {
				break
			}
			if raw, ok := strings.CutPrefix(line, "data: "); ok {
				f.Raw = raw
				if err := json.Unmarshal([]byte(raw), &f.Data); err != nil {
					s.t.Fatalf("frame %q: %v", raw, err)
				}
			}
		}
		s.all = append(s.all, f)
		if f.typ() == typ {
			return f
		}
	}
}

func (e *env) answer(session, id string, approved bool) *response {
	return e.do("POST", "/chat/sessions/"+session+"/ask-user-response", "", map[string]any{"correlation_id": id, "approved": approved})
}

func approvalRuntime(t *testing.T, tool *guardedTool, o runtime.Options) *env {
	t.Helper()
	o.Agent = loadAgent(t, "hello")
	o.ExtraTools = []tools.Tool{tool}
	if o.Models == nil {
		o.DefaultModel = agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}
	}
	return start(t, o)
}

// An approved call runs after the answer; a denied one does not, and its result says so; an
// answer counts once.
func TestApprovalRoundTrip(t *testing.T) {
	for _, approve := range []bool{true, false} {
		tool := &guardedTool{name: "refund"}
		e := approvalRuntime(t, tool, runtime.Options{})
		s := e.open(t, map[string]any{"message": "/tool refund {\"order\": 7}", "session_id": "ses_ap"})
		c := s.until("confirmation_required").Data
		id := str(c["correlation_id"])
		if !strings.HasPrefix(id, "apr_") || c["tool_name"] != "refund" || c["endpoint"] != "/refunds" || c["method"] != "POST" ||
			c["reason"] != "refunds move money" || c["connection_name"] != "billing" || c["escalated"] != false || c["params"].(map[string]any)["order"] != float64(7) {
			t.Fatalf("confirmation_required %v", c)
		}
		if tool.calls.Load() != 0 {
			t.Fatal("the call ran before its approval")
		}
		if r := e.answer("ses_ap", "apr_unknown", true); r.Status != http.StatusNotFound {
			t.Errorf("unknown id: %d %s", r.Status, r.Body)
		}
		if r := e.answer("ses_other", id, true); r.Status != http.StatusNotFound {
			t.Errorf("another session's path: %d %s", r.Status, r.Body)
		}
		r := e.answer("ses_ap", id, approve)
		want := map[bool]string{true: "approved", false: "denied"}[approve]
		if r.Status != http.StatusOK || r.JSON["status"] != want {
			t.Fatalf("answer: %d %s", r.Status, r.Body)
		}
		if r := e.answer("ses_ap", id, !approve); r.Status != http.StatusConflict || r.JSON["error"] != "already_answered" {
			t.Errorf("second answer: %d %s", r.Status, r.Body)
		}
		d := s.until(want).Data
		if d["resource_type"] != "tool_call" || d["preview_id"] != id || d["timeout"] != nil {
			t.Errorf("%s frame %v", want, d)
		}
		res := s.until("tool_call_result").Data
		s.until("done")
		if approve && (res["status"] != "success" || tool.calls.Load() != 1) {
			t.Errorf("approved: result %v, %d calls", res, tool.calls.Load())
		}
		if !approve && (res["status"] != "error" || !strings.Contains(str(res["error"]), "denied") || tool.calls.Load() != 0) {
			t.Errorf("denied: result %v, %d calls", res, tool.calls.Load())
		}
	}
}

// No answer in time denies the call, and the denied frame says it was the timeout.
func TestApprovalTimeout(t *testing.T) {
	tool := &guardedTool{name: "refund"}
	e := approvalRuntime(t, tool, runtime.Options{ApprovalTimeout: 50 * time.Millisecond})
	s := e.open(t, map[string]any{"message": "/tool refund {}"})
	id := str(s.until("confirmation_required").Data["correlation_id"])
	if d := s.until("denied").Data; d["timeout"] != true || d["preview_id"] != id {
		t.Errorf("denied %v", d)
	}
	if res := s.until("tool_call_result").Data; res["status"] != "error" || !strings.Contains(str(res["error"]), "in time") || tool.calls.Load() != 0 {
		t.Errorf("result %v, %d calls", res, tool.calls.Load())
	}
}

// Two calls of one model answer wait for their approvals independently.
func TestTwoApprovalsAtOnce(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t,
		modelstest.Turn{ToolCalls: []modelstest.ToolCall{{ID: "c1", Name: "refund", Arguments: `{}`}, {ID: "c2", Name: "refund", Arguments: `{}`}}},
		modelstest.Turn{Text: []string{"done"}})
	tool := &guardedTool{name: "refund"}
	e := approvalRuntime(t, tool, runtime.Options{Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "m"}})
	s := e.open(t, map[string]any{"message": "refund both", "session_id": "ses_two"})
	a := s.until("confirmation_required").Data
	b := s.until("confirmation_required").Data
	byTool := map[string]string{str(a["tool_id"]): str(a["correlation_id"]), str(b["tool_id"]): str(b["correlation_id"])}
	// The second is answered first: it runs while the first still waits.
	if r := e.answer("ses_two", byTool["c2"], true); r.Status != http.StatusOK {
		t.Fatal(r.Status, string(r.Body))
	}
	if res := s.until("tool_call_result").Data; res["tool_id"] != "c2" || res["status"] != "success" {
		t.Fatalf("first result %v", res)
	}
	if r := e.answer("ses_two", byTool["c1"], false); r.Status != http.StatusOK {
		t.Fatal(r.Status, string(r.Body))
	}
	if res := s.until("tool_call_result").Data; res["tool_id"] != "c1" || res["status"] != "error" {
		t.Errorf("second result %v", res)
	}
	if d := s.until("done").Data; d["reason"] != "model_stop" || tool.calls.Load() != 1 {
		t.Errorf("done %v, %d calls", d, tool.calls.Load())
	}
}

// A client that leaves while an approval waits ends the turn (user_abort) without the call,
// and a late answer finds the approval decided.
func TestApprovalDisconnect(t *testing.T) {
	tool := &guardedTool{name: "refund"}
	e := approvalRuntime(t, tool, runtime.Options{})
	s := e.open(t, map[string]any{"message": "/tool refund {}", "session_id": "ses_gone"})
	id := str(s.until("confirmation_required").Data["correlation_id"])
	s.stop()
	h := e.waitIdle("ses_gone")
	msgs, _ := h["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	if tool.calls.Load() != 0 || last["interrupted"] != true {
		t.Errorf("%d calls; last message %v", tool.calls.Load(), last)
	}
	if r := e.answer("ses_gone", id, true); r.Status != http.StatusConflict || !strings.Contains(str(r.JSON["message"]), "cancelled") {
		t.Errorf("late answer: %d %s", r.Status, r.Body)
	}
}

// The answer may reach another runtime of the agent: over a shared database it wakes the turn
// through Redis, or, without Redis, when the waiting turn next reads its approval.
func TestApprovalAnsweredElsewhere(t *testing.T) {
	for _, withRedis := range []bool{true, false} {
		name := map[bool]string{true: "redis", false: "polling"}[withRedis]
		t.Run(name, func(t *testing.T) {
			db := dbtest.Postgres(t)
			store := dbstore.New(db)
			locks := &memstore.Locks{}
			hub := func() *approvals.Hub {
				cfg := approvals.HubConfig{Store: approvals.NewDB(db), PollInterval: 20 * time.Millisecond}
				if withRedis {
					cfg.Redis = dbtest.Redis(t)
					cfg.PollInterval = time.Hour // only Redis can wake it in time
				}
				h, err := approvals.NewHub(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { h.Close() })
				return h
			}
			tool := &guardedTool{name: "refund"}
			opts := func() runtime.Options {
				return runtime.Options{AgentID: "agt_1", Sessions: store, Locker: locks, SharedStore: true, Approvals: hub()}
			}
			a := approvalRuntime(t, tool, opts())
			b := approvalRuntime(t, tool, opts())
			s := a.open(t, map[string]any{"message": "/tool refund {}", "session_id": "ses_far"})
			id := str(s.until("confirmation_required").Data["correlation_id"])
			if r := b.answer("ses_far", id, true); r.Status != http.StatusOK {
				t.Fatalf("answer on the other runtime: %d %s", r.Status, r.Body)
			}
			s.until("approved")
			if res := s.until("tool_call_result").Data; res["status"] != "success" || tool.calls.Load() != 1 {
				t.Errorf("result %v, %d calls", res, tool.calls.Load())
			}
			_, _ = io.Copy(io.Discard, s.rd)
		})
	}
}

// timedTool records when its call starts.
type timedTool struct {
	guardedTool
	called chan time.Time
}

func (g *timedTool) Call(ctx context.Context, c tools.Call) (tools.Result, error) {
	g.called <- time.Now()
	return g.guardedTool.Call(ctx, c)
}

// BenchmarkApprovalAnswerToCall is the time from sending ask-user-response to the approved call
// starting, over a real listener: memory approvals in one runtime, and approvals in Postgres
// answered on a second runtime that wakes the first through Redis. Reports p50 and p99.
func BenchmarkApprovalAnswerToCall(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "postgres+redis"}[shared]
		b.Run(name, func(b *testing.B) {
			tool := &timedTool{guardedTool: guardedTool{name: "refund"}, called: make(chan time.Time, 1)}
			o := runtime.Options{Agent: loadAgent(b, "hello"), ExtraTools: []tools.Tool{tool},
				DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}}
			a, answerer := start(b, o), (*env)(nil)
			if shared {
				db := dbtest.Postgres(b)
				store, locks := dbstore.New(db), &memstore.Locks{}
				hub := func() *approvals.Hub {
					h, err := approvals.NewHub(context.Background(), approvals.HubConfig{Store: approvals.NewDB(db), Redis: dbtest.Redis(b), PollInterval: time.Hour})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { h.Close() })
					return h
				}
				o.AgentID, o.Sessions, o.Locker, o.SharedStore = "agt_b", store, locks, true
				o.Approvals = hub()
				a = start(b, o)
				o.Approvals = hub()
				answerer = start(b, o)
			} else {
				answerer = a
			}
			lat := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				session := "ses_b" + strconv.Itoa(i)
				s := openB(b, a, map[string]any{"message": "/tool refund {}", "session_id": session})
				id := str(s.until("confirmation_required").Data["correlation_id"])
				sent := time.Now()
				if r := answerer.answer(session, id, true); r.Status != http.StatusOK {
					b.Fatalf("answer: %d %s", r.Status, r.Body)
				}
				lat = append(lat, (<-tool.called).Sub(sent))
				s.until("done")
				s.stop()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// The AI SDK stream carries an approval in the protocol's own chunks: tool-approval-request,
// and tool-output-denied for a denial (without a repeated error).
func TestApprovalAIStream(t *testing.T) {
	tool := &guardedTool{name: "refund"}
	e := approvalRuntime(t, tool, runtime.Options{ApprovalTimeout: 30 * time.Millisecond})
	r := e.do("POST", "/chat/ai-stream", "", map[string]any{"message": "/tool refund {}"})
	var chunks []string
	for _, f := range r.Frames {
		chunks = append(chunks, f.typ())
	}
	want := []string{"tool-input-available", "tool-approval-request", "data-confirmation_required", "tool-output-denied", "data-denied"}
	at := 0
	for _, c := range chunks {
		if at < len(want) && c == want[at] {
			at++
		}
	}
	if at != len(want) || slices.Contains(chunks, "tool-output-error") {
		t.Errorf("chunks %v: want %v in order and no tool-output-error", chunks, want)
	}
	for _, f := range r.Frames {
		if f.typ() == "tool-approval-request" && (!strings.HasPrefix(str(f.Data["approvalId"]), "apr_") || len(f.Data) != 3) {
			t.Errorf("chunk %s: want exactly type, approvalId, toolCallId", f.Raw)
		}
	}
}
