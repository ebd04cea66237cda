package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseEvent is one event of a chat stream: its id and its data line.
type sseEvent struct {
	ID   int64
	Data string
}

func (e sseEvent) typ() string {
	_, rest, _ := strings.Cut(e.Data, `"type":"`)
	typ, _, _ := strings.Cut(rest, `"`)
	return typ
}

// readSSE reads events until EOF or until stop were read (stop <= 0: all).
func readSSE(r io.Reader, stop int) []sseEvent {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var out []sseEvent
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" {
				out = append(out, cur)
				cur = sseEvent{}
				if stop > 0 && len(out) >= stop {
					return out
				}
			}
		case strings.HasPrefix(line, "id: "):
			cur.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		}
	}
	return out
}

// agentStream sends a request to the agent at base and returns the open response.
func agentStream(t *testing.T, base string, a *flowAgent, method, path string, body any, hdr map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = a.Slug + ".apps.localhost"
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func sessionOfInit(t *testing.T, evs []sseEvent) string {
	t.Helper()
	if len(evs) == 0 || evs[0].typ() != "init" {
		t.Fatalf("stream does not open with init: %v", evs)
	}
	_, rest, _ := strings.Cut(evs[0].Data, `"session_id":"`)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}

// TestReattachAcrossRunners: on two runners sharing Postgres and Redis, a client that drops a
// turn with a tool call on runner1 at any frame boundary reattaches on runner2 and gets
// exactly the rest (no frame lost or repeated, ids strictly increasing, then done); a
// reconnect after done replays and ends; POST /stop on runner2 ends a turn running on runner1
// with user_abort.
func TestReattachAcrossRunners(t *testing.T) {
	skipShortLocally(t)
	c := startCluster(t, 2)
	g := c.gitAgent("reattach")
	first := g.push("main", g.first)
	c.waitSettled([]string{first}, 3*time.Minute)
	c.waitServed(g, first)
	r1, r2 := "http://"+c.proc("runner1").addr, "http://"+c.proc("runner2").addr

	// The reference tape: a turn with a tool call that nobody leaves.
	resp := agentStream(t, r1, g.flowAgent, "POST", "/chat/stream", map[string]any{"message": flowMessage("quick")}, nil)
	want := readSSE(resp.Body, 0)
	resp.Body.Close()
	if len(want) < 4 || want[1].typ() != "tool_call_start" || want[len(want)-1].typ() != "done" {
		t.Fatalf("reference turn: %v", want)
	}
	for k := 1; k <= len(want); k++ {
		resp := agentStream(t, r1, g.flowAgent, "POST", "/chat/stream", map[string]any{"message": flowMessage("quick"), "on_disconnect": "continue"}, nil)
		got := readSSE(resp.Body, k)
		resp.Body.Close() // dropped after k frames
		id := sessionOfInit(t, got)
		r := agentStream(t, r2, g.flowAgent, "GET", "/chat/sessions/"+id+"/stream", nil, map[string]string{"Last-Event-ID": strconv.Itoa(k)})
		if r.StatusCode != http.StatusOK {
			t.Fatalf("k=%d: resume on runner2 = %d", k, r.StatusCode)
		}
		got = append(got, readSSE(r.Body, 0)...)
		r.Body.Close()
		if len(got) != len(want) {
			t.Fatalf("k=%d: %d frames, want %d: %v", k, len(got), len(want), got)
		}
		for i, ev := range got {
			if ev.ID != int64(i+1) || ev.typ() != want[i].typ() {
				t.Fatalf("k=%d: frame %d = %v, want id %d %s", k, i+1, ev, i+1, want[i].typ())
			}
		}
	}

	// Stop from the other runner: the turn waits in the flow's 3 second step on runner1.
	resp = agentStream(t, r1, g.flowAgent, "POST", "/chat/stream", map[string]any{"message": flowMessage("slow")}, nil)
	defer resp.Body.Close()
	evs := readSSE(resp.Body, 2) // init, tool_call_start
	id := sessionOfInit(t, evs)
	s, out, err := agentDo(context.Background(), r2, g.flowAgent, "POST", "/chat/sessions/"+id+"/stop", nil)
	if err != nil || s != http.StatusOK || out["stopped"] != true {
		t.Fatalf("stop on runner2 = %d %v %v", s, out, err)
	}
	rest := readSSE(resp.Body, 0)
	if len(rest) == 0 || rest[len(rest)-1].typ() != "done" || !strings.Contains(rest[len(rest)-1].Data, `"reason":"user_abort"`) {
		t.Fatalf("after the stop: %v", rest)
	}
	// After done: runner2 replays the whole stopped turn and ends; a second stop finds nothing.
	r := agentStream(t, r2, g.flowAgent, "GET", "/chat/sessions/"+id+"/stream", nil, nil)
	replay := readSSE(r.Body, 0)
	r.Body.Close()
	if len(replay) != len(evs)+len(rest) || replay[len(replay)-1].typ() != "done" {
		t.Errorf("replay after done: %v", replay)
	}
	if s, out, err := agentDo(context.Background(), r2, g.flowAgent, "POST", "/chat/sessions/"+id+"/stop", nil); err != nil || s != http.StatusConflict {
		t.Errorf("stop after done = %d %v %v", s, out, err)
	}
	// Another caller's session, or none, is 404 on the resume routes.
	if r := agentStream(t, r2, g.flowAgent, "GET", "/chat/sessions/ses_nobody/stream", nil, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("unknown session = %d", r.StatusCode)
	}
}
