package runtime_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
	"svc/runner/sessions/memstore"
	"svc/runner/streams"
	"svc/runner/streams/memstream"
	"svc/runner/streams/redisstream"
)

var gpt4o = map[string]any{"provider": "openai", "model": "gpt-4o"}

// event is one SSE event of a resumed stream: its id (0: none) and data.
type event struct {
	ID   int64
	Data string
}

// readEvents reads SSE events until EOF or until stop events were read (stop <= 0: all). Pass
// the same *bufio.Reader to read on where an earlier call stopped.
func readEvents(t testing.TB, r io.Reader, stop int) []event {
	t.Helper()
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	var out []event
	var cur event
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return out
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if cur.Data != "" {
				out = append(out, cur)
				cur = event{}
				if stop > 0 && len(out) >= stop {
					return out
				}
			}
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				t.Errorf("bad id line %q", line)
			}
			cur.ID = id
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		}
	}
}

// toolTurns is a model script of n chat turns, each with two tool calls, then an answer in
// three pieces, each event a little delayed, so that reconnects land while the turn runs.
func toolTurns(n int) []modelstest.Turn {
	var script []modelstest.Turn
	for range n {
		call := alwaysTool()
		call.Delay = time.Millisecond
		script = append(script, call, call, modelstest.Turn{Text: []string{"one ", "two ", "three"}, Delay: time.Millisecond})
	}
	return script
}

func resume(e *env, path, lastID string) *http.Response {
	e.t.Helper()
	req := e.request("GET", path, "", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// checkTape checks that got is the whole turn of want: same frames, ids 1..n strictly
// increasing, no duplicate, no gap, ending with done.
func checkTape(t *testing.T, want, got []event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d:\n%v", len(got), len(want), got)
	}
	for i, ev := range got {
		if ev.ID != int64(i+1) {
			t.Fatalf("frame %d has id %d: %v", i+1, ev.ID, got)
		}
		if typeOf(ev.Data) != typeOf(want[i].Data) {
			t.Fatalf("frame %d is %s, want %s", i+1, typeOf(ev.Data), typeOf(want[i].Data))
		}
	}
	if typeOf(got[len(got)-1].Data) != "done" {
		t.Fatalf("tape does not end with done")
	}
}

func typeOf(data string) string {
	_, rest, _ := strings.Cut(data, `"type":"`)
	typ, _, _ := strings.Cut(rest, `"`)
	return typ
}

// A client that drops at any frame boundary of a turn with tool calls and reattaches with
// Last-Event-ID gets exactly the rest: the frames it had plus the replay are the whole turn.
func TestReattachAtEveryFrameBoundary(t *testing.T) {
	const maxFrames = 40
	srv := modelstest.NewOpenAIServer(t, toolTurns(maxFrames+1)...)
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	// The reference tape: a turn nobody leaves.
	resp, err := e.srv.Client().Do(e.request("POST", "/chat/stream", "", map[string]any{"message": "go", "model": gpt4o}))
	if err != nil {
		t.Fatal(err)
	}
	want := readEvents(t, resp.Body, 0)
	resp.Body.Close()
	if len(want) < 8 || len(want) > maxFrames || len(ofTypeEv(want, "tool_call_start")) != 2 {
		t.Fatalf("reference turn: %v", want)
	}
	for k := 0; k < len(want); k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			resp, err := e.srv.Client().Do(e.request("POST", "/chat/stream", "", map[string]any{"message": "go", "on_disconnect": "continue", "model": gpt4o}))
			if err != nil {
				t.Fatal(err)
			}
			got := readEvents(t, resp.Body, max(k, 1))
			resp.Body.Close() // the client drops after k frames (k = 0: after init, reattaching from 0)
			if k == 0 {
				got = got[:0]
			}
			id := sessionFromInit(t, want, got, e)
			last := ""
			if k > 0 {
				last = strconv.FormatInt(got[len(got)-1].ID, 10)
			}
			r := resume(e, "/chat/sessions/"+id+"/stream", last)
			defer r.Body.Close()
			if r.StatusCode != http.StatusOK {
				t.Fatalf("resume: %d", r.StatusCode)
			}
			got = append(got, readEvents(t, r.Body, 0)...)
			checkTape(t, want, got)
			e.waitIdle(id)
		})
	}
}

// sessionFromInit is the session of the turn just started: from its init frame when read,
// else from the newest session in history.
func sessionFromInit(t *testing.T, want, got []event, e *env) string {
	t.Helper()
	if len(got) > 0 {
		_, rest, _ := strings.Cut(got[0].Data, `"session_id":"`)
		id, _, _ := strings.Cut(rest, `"`)
		return id
	}
	r := e.do("GET", "/sessions/history", "", nil)
	ss, _ := r.JSON["sessions"].([]any)
	if len(ss) == 0 {
		t.Fatalf("no session: %s", r.Body)
	}
	newest := ss[0].(map[string]any)
	return str(newest["session_id"])
}

func ofTypeEv(evs []event, typ string) []event {
	var out []event
	for _, ev := range evs {
		if typeOf(ev.Data) == typ {
			out = append(out, ev)
		}
	}
	return out
}

// After done a reconnect replays the rest and ends; 5 minutes later there is nothing (204).
func TestReattachAfterDoneAndExpiry(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	log := memstream.New(memstream.Config{Now: clk.Now})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Now: clk.Now, TurnLog: log})
	fs := e.chat("", map[string]any{"message": "hello"})
	id := sessionOf(t, fs)
	for _, path := range []string{"/chat/sessions/" + id + "/stream", "/chat/sessions/" + id + "/stream?after=2"} {
		r := resume(e, path, "")
		evs := readEvents(t, r.Body, 0)
		r.Body.Close()
		from := 0
		if strings.HasSuffix(path, "after=2") {
			from = 2
		}
		if r.StatusCode != http.StatusOK || len(evs) != len(fs)-from || evs[0].ID != int64(from+1) || typeOf(evs[len(evs)-1].Data) != "done" {
			t.Fatalf("%s: %d %v", path, r.StatusCode, evs)
		}
	}
	// The AI SDK route replays the turn as a UI message stream.
	r := resume(e, "/chat/ai-stream/"+id+"/stream", "")
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || r.Header.Get("x-vercel-ai-ui-message-stream") != "v1" ||
		!strings.Contains(string(body), `"type":"start"`) || !strings.Contains(string(body), `"type":"finish"`) || !strings.Contains(string(body), "data: [DONE]") {
		t.Fatalf("ai resume: %d %s", r.StatusCode, body)
	}
	clk.Add(streams.Retention)
	for _, path := range []string{"/chat/sessions/" + id + "/stream", "/chat/ai-stream/" + id + "/stream"} {
		if r := e.do("GET", path, "", nil); r.Status != http.StatusNoContent {
			t.Errorf("%s after 5 minutes: %d %s", path, r.Status, r.Body)
		}
	}
	// Another turn sweeps the expired log away.
	e.chat("", map[string]any{"message": "again"})
	if n := log.Len(); n != 1 {
		t.Errorf("%d logs kept, want 1", n)
	}
}

func TestReattachErrors(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	fs := e.chat("", map[string]any{"message": "hello"})
	id := sessionOf(t, fs)
	cases := []struct {
		method, path, lastID string
		body                 any
		status               int
		field                string
	}{
		{"GET", "/chat/sessions/sess_nope/stream", "", nil, http.StatusNotFound, ""},
		{"GET", "/chat/ai-stream/sess_nope/stream", "", nil, http.StatusNotFound, ""},
		{"POST", "/chat/sessions/sess_nope/stop", "", nil, http.StatusNotFound, ""},
		{"GET", "/chat/sessions/" + id + "/stream", "x", nil, http.StatusBadRequest, "Last-Event-ID"},
		{"GET", "/chat/sessions/" + id + "/stream?after=-1", "", nil, http.StatusBadRequest, "after"},
		{"POST", "/chat/sessions/" + id + "/stop", "", nil, http.StatusConflict, ""},
		{"POST", "/chat/stream", "", map[string]any{"message": "x", "on_disconnect": "linger"}, http.StatusBadRequest, "on_disconnect"},
	}
	for _, c := range cases {
		req := e.request(c.method, c.path, "", c.body)
		if c.lastID != "" {
			req.Header.Set("Last-Event-ID", c.lastID)
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.field) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
}

// POST /chat/sessions/{id}/stop ends a running turn with user_abort; the client sees done.
func TestStopRunningTurn(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"partial"}, Hang: true})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	resp, err := e.srv.Client().Do(e.request("POST", "/chat/stream", "", map[string]any{"message": "start"}))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	fs := readEvents(t, body, 2) // init, text_delta: the model now hangs
	id := sessionFromInit(t, nil, fs, e)
	if r := e.do("POST", "/chat/sessions/"+id+"/stop", "", nil); r.Status != http.StatusOK || r.JSON["stopped"] != true {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	rest := readEvents(t, body, 0)
	if len(rest) == 0 || typeOf(rest[len(rest)-1].Data) != "done" || !strings.Contains(rest[len(rest)-1].Data, `"reason":"user_abort"`) {
		t.Fatalf("after stop: %v", rest)
	}
	e.waitIdle(id)
	if r := e.do("POST", "/chat/sessions/"+id+"/stop", "", nil); r.Status != http.StatusConflict || r.JSON["error"] != "no_active_turn" {
		t.Errorf("stop with no turn: %d %s", r.Status, r.Body)
	}
}

// A client that leaves a "continue" turn and never comes back: the turn ends, its log
// expires, and no goroutine stays.
func TestClientNeverComesBack(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	log := memstream.New(memstream.Config{Now: clk.Now})
	srv := modelstest.NewOpenAIServer(t, toolTurns(2)...)
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}, TurnLog: log})
	e.chat("", map[string]any{"message": "warm up", "model": gpt4o}) // pools and caches start their goroutines
	e.srv.Client().CloseIdleConnections()
	before := goruntime.NumGoroutine()
	resp, err := e.srv.Client().Do(e.request("POST", "/chat/stream", "", map[string]any{"message": "go", "on_disconnect": "continue", "model": gpt4o}))
	if err != nil {
		t.Fatal(err)
	}
	fs := readEvents(t, resp.Body, 1)
	resp.Body.Close() // gone for good
	id := sessionFromInit(t, nil, fs, e)
	h := e.waitIdle(id) // the turn ran to its end without its client
	msgs := h["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["content"] != "one two three" || last["interrupted"] == true {
		t.Fatalf("the turn did not finish: %v", last)
	}
	clk.Add(streams.Retention)
	if r := e.do("GET", "/chat/sessions/"+id+"/stream", "", nil); r.Status != http.StatusNoContent {
		t.Errorf("after 5 minutes: %d", r.Status)
	}
	e.srv.Client().CloseIdleConnections()
	for deadline := time.Now().Add(10 * time.Second); goruntime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", goruntime.NumGoroutine(), before, buf[:goruntime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// redisTurnLog returns the turn logs of runners runners sharing the test Redis under a key
// prefix of tb's own, deleted with the logs when tb ends.
func redisTurnLog(tb testing.TB, runners int) []*redisstream.Log {
	tb.Helper()
	rdb := dbtest.Redis(tb)
	prefix := fmt.Sprintf("test:turnlog:%s:%d:", tb.Name(), time.Now().UnixNano())
	tb.Cleanup(func() {
		if keys, _ := rdb.Keys(context.Background(), prefix+"*").Result(); len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	out := make([]*redisstream.Log, runners)
	for i := range out {
		tl, err := redisstream.New(context.Background(), redisstream.Config{Redis: rdb, Prefix: prefix, Logger: quietLogger()})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = tl.Close() })
		out[i] = tl
	}
	return out
}

// twoRunners starts two runtimes of one agent that share a session store, its locks and a
// Redis turn log: two runners of a scale-out.
func twoRunners(t *testing.T, models *modelstest.Server) (*env, *env) {
	t.Helper()
	store, locks := memstore.New(), &memstore.Locks{}
	ag := loadAgent(t, "support-desk")
	var out [2]*env
	for i, tl := range redisTurnLog(t, 2) {
		out[i] = start(t, runtime.Options{Agent: ag, AgentID: "agt_x", Sessions: store, Locker: locks, SharedStore: true, TurnLog: tl,
			Models: openaiModels(models), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	}
	return out[0], out[1]
}

// Across two runners on Redis: a client that drops a turn with tool calls on one at any frame
// boundary reattaches on the other and gets exactly the rest; a stop sent to the other runner
// ends the turn.
func TestReattachAcrossRunnersOnRedis(t *testing.T) {
	const maxFrames = 40
	srv := modelstest.NewOpenAIServer(t, toolTurns(maxFrames+1)...)
	a, b := twoRunners(t, srv)
	resp, err := a.srv.Client().Do(a.request("POST", "/chat/stream", "", map[string]any{"message": "go", "model": gpt4o}))
	if err != nil {
		t.Fatal(err)
	}
	want := readEvents(t, resp.Body, 0)
	resp.Body.Close()
	if len(want) < 8 || len(ofTypeEv(want, "tool_call_start")) != 2 {
		t.Fatalf("reference turn: %v", want)
	}
	for k := 1; k <= len(want); k++ {
		resp, err := a.srv.Client().Do(a.request("POST", "/chat/stream", "", map[string]any{"message": "go", "on_disconnect": "continue", "model": gpt4o}))
		if err != nil {
			t.Fatal(err)
		}
		got := readEvents(t, resp.Body, k)
		resp.Body.Close()
		id := sessionFromInit(t, want, got, a)
		r := resume(b, "/chat/sessions/"+id+"/stream", strconv.FormatInt(got[len(got)-1].ID, 10))
		if r.StatusCode != http.StatusOK {
			t.Fatalf("k=%d: resume on the other runner: %d", k, r.StatusCode)
		}
		got = append(got, readEvents(t, r.Body, 0)...)
		r.Body.Close()
		checkTape(t, want, got)
		a.waitIdle(id)
	}
	// Stop from the other runner, on two runners whose model hangs after its first word (the
	// script above does not hang: a stop could come after the turn's end).
	a, b = twoRunners(t, modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"partial"}, Hang: true}))
	resp, err = a.srv.Client().Do(a.request("POST", "/chat/stream", "", map[string]any{"message": "hang", "model": gpt4o}))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	fs := readEvents(t, body, 2) // init, text_delta: the model now hangs
	id := sessionFromInit(t, nil, fs, a)
	if r := b.do("POST", "/chat/sessions/"+id+"/stop", "", nil); r.Status != http.StatusOK {
		t.Fatalf("stop on the other runner: %d %s", r.Status, r.Body)
	}
	rest := readEvents(t, body, 0)
	if len(rest) == 0 || !strings.Contains(rest[len(rest)-1].Data, `"reason":"user_abort"`) {
		t.Fatalf("after the stop: %v", rest)
	}
	// After done, the other runner replays the whole turn and ends.
	r := resume(b, "/chat/sessions/"+id+"/stream", "")
	replay := readEvents(t, r.Body, 0)
	r.Body.Close()
	if len(replay) != len(fs)+len(rest) {
		t.Errorf("replay after done: %v\nstream: %v %v", replay, fs, rest)
	}
}
