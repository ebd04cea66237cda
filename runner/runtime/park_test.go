package runtime_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/agent"
	"svc/runner/models/modelstest"
	"svc/runner/park"
	"svc/runner/runtime"
)

// parkedEnv is a runtime served as svc serves it (a park.Listener), parking its streams
// after 1 ms, with the count of the server's connection states.
type parkedEnv struct {
	*env
	mu     sync.Mutex
	states map[http.ConnState]int
}

func startParked(t *testing.T, opts runtime.Options) *parkedEnv {
	t.Helper()
	opts.ParkAfter = time.Millisecond
	p := &parkedEnv{states: map[http.ConnState]int{}}
	p.env = startServer(t, opts, func(srv *httptest.Server) {
		pl := park.NewListener(srv.Listener)
		srv.Listener = pl
		srv.Config.ConnContext = pl.ConnContext
		srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			p.mu.Lock()
			p.states[st]++
			p.mu.Unlock()
		}
	})
	return p
}

func (p *parkedEnv) count(st http.ConnState) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.states[st]
}

func (p *parkedEnv) waitParked(n int) {
	p.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); p.count(http.StateHijacked) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			p.t.Fatalf("%d streams parked, want %d", p.count(http.StateHijacked), n)
		}
	}
}

// slowText is a model answer in three pieces 20 ms apart: a turn that runs long enough to park.
func slowText() modelstest.Turn {
	return modelstest.Turn{Text: []string{"one ", "two ", "three"}, Delay: 20 * time.Millisecond}
}

// A parked turn streams to its end as an unparked one does, in the chat stream and the AI SDK
// stream, and the connection then serves the client's next turn.
func TestParkedTurnsStreamWhole(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, slowText(), slowText(), slowText())
	e := startParked(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	fs := e.chat("", map[string]any{"message": "hi"})
	if got := types(fs); got[0] != "init" || got[len(got)-1] != "done" || len(ofType(fs, "text_delta")) != 3 {
		t.Fatalf("parked chat stream: %v", got)
	}
	for i, f := range fs {
		if f.ID != i+1 {
			t.Fatalf("frame %d has id %d: ids must count 1..n across the park", i, f.ID)
		}
	}
	id := str(fs[0].Data["session_id"])
	fs = e.chat("", map[string]any{"message": "again", "session_id": id})
	if got := types(fs); got[len(got)-1] != "done" || str(ofType(fs, "done")[0].Data["reason"]) != "model_stop" {
		t.Fatalf("second parked turn: %v", got)
	}
	ai := e.do("POST", "/chat/ai-stream", "", map[string]any{"message": "q", "session_id": id}).Frames
	checkChunks(t, ai)
	if got := types(ai); got[len(got)-1] != "[DONE]" || len(ofType(ai, "text-delta")) != 3 {
		t.Fatalf("parked AI SDK stream: %v", got)
	}
	if n := e.count(http.StateHijacked); n != 3 {
		t.Errorf("%d streams parked, want 3", n)
	}
	h := e.waitIdle(id)
	msgs := h["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["content"] != "one two three" {
		t.Errorf("the stored answer = %v", last)
	}
	// One connection: accepted once, given back after each parked stream.
	for deadline := time.Now().Add(5 * time.Second); e.count(http.StateNew) < 4 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := e.count(http.StateNew); n != 4 {
		t.Errorf("%d new connection states, want 4: one connection given back 3 times", n)
	}
}

// A client that leaves a parked turn aborts it, as it does an unparked one; with
// on_disconnect "continue" the parked turn runs to its end without its client.
func TestParkedTurnClientLeaves(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"partial"}, Hang: true}, slowText())
	e := startParked(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	leave := func(body map[string]any, parked int) string {
		resp, err := e.srv.Client().Do(e.request("POST", "/chat/stream", "", body))
		if err != nil {
			t.Fatal(err)
		}
		fs := readEvents(t, bufio.NewReader(resp.Body), 2) // init, the first text
		e.waitParked(parked)
		resp.Body.Close()
		e.srv.Client().CloseIdleConnections()
		return sessionFromInit(t, nil, fs, e.env)
	}
	id := leave(map[string]any{"message": "hang"}, 1)
	msgs := e.waitIdle(id)["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["interrupted"] != true {
		t.Errorf("the parked turn whose client left: %v, want interrupted", last)
	}
	id = leave(map[string]any{"message": "go on", "on_disconnect": "continue"}, 2)
	msgs = e.waitIdle(id)["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["content"] != "one two three" || last["interrupted"] == true {
		t.Errorf("the parked turn that continues: %v, want its whole answer", last)
	}
	if r := e.do("GET", "/chat/sessions/"+id+"/stream", "", nil); r.Status != http.StatusOK || !strings.Contains(r.Frames[len(r.Frames)-1].Raw, `"done"`) {
		t.Errorf("the continued turn's log: %d %v", r.Status, types(r.Frames))
	}
}
