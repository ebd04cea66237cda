package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent/agenttest"
	"svc/client"
	"svc/runner/models/modelstest"
)

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// frameTypes lists the types of frames, a run of text_delta frames as one.
func frameTypes(frames []client.Frame) string {
	var types []string
	for _, f := range frames {
		if f.Type != client.FrameTextDelta || len(types) == 0 || types[len(types)-1] != f.Type {
			types = append(types, f.Type)
		}
	}
	return strings.Join(types, " ")
}

// text is the answer of frames: every text_delta's content.
func text(frames []client.Frame) string {
	var b strings.Builder
	for _, f := range frames {
		if f.Type == client.FrameTextDelta {
			b.WriteString(f.Content)
		}
	}
	return b.String()
}

func TestChatStreamThroughThePlatformAddress(t *testing.T) {
	p := startPlatform(t)
	ctx := context.Background()
	a, d := p.deploy(t, "hello", writeTree(t, map[string]string{
		"svc.json":                `{"name":"hello","version":"1"}`,
		"agents/default/AGENT.md": "The plan is {{context.plan}}.",
	}))
	// The agent's host name is never resolved: both kinds of transport connect to the platform.
	transports := map[string]*http.Client{
		"default transport": nil,
		"custom transport": {Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return http.DefaultTransport.RoundTrip(r)
		})},
	}
	var token string
	for name, hc := range transports {
		t.Run(name, func(t *testing.T) {
			c := client.New(p.url, p.token, hc)
			tok, err := c.MintRuntimeToken(ctx, a.AgentID, client.TokenRequest{TTLSeconds: 60})
			if err != nil {
				t.Fatal(err)
			}
			token = tok.Token
			if left := time.Until(tok.ExpiresAt); left <= 0 || left > time.Minute {
				t.Errorf("token expires at %s, want within the minute asked for", tok.ExpiresAt)
			}
			for _, agentURL := range []string{a.URL, d.URL + "/"} { // persistent, pinned
				var got []client.Frame
				req := client.ChatRequest{Message: "hi", SessionID: "s9", Context: map[string]string{"plan": "pro"}}
				err := c.ChatStream(ctx, agentURL, tok.Token, req, func(f client.Frame) error {
					got = append(got, f)
					return nil
				})
				if err != nil {
					t.Fatalf("ChatStream(%s) = %v", agentURL, err)
				}
				// The first turn of the session warns that it falls back to the echo model.
				if types := frameTypes(got); types != "init text_delta done" && types != "init warning text_delta done" {
					t.Errorf("frames = %s, want init, the answer and done", types)
				}
				last := got[len(got)-1]
				if got[0].SessionID != "s9" || text(got) != "echo: hi" || last.Reason != "model_stop" || last.Turns != 1 || last.Usage == nil {
					t.Errorf("frames = %+v", got)
				}
			}
		})
	}
	// The runtime kept every turn in the session the client named, with the context it sent.
	status, body := p.hostRequest(t, "GET", a.URL, "/sessions/history/s9", token)
	if status != 200 || strings.Count(body, `"role":"user","content":"hi"`) != 4 {
		t.Errorf("history of s9 = %d %s, want the four turns", status, body)
	}
	status, body = p.hostRequest(t, "GET", a.URL, "/inspect/context?session_id=s9", token)
	if status != 200 || !strings.Contains(body, "The plan is pro.") {
		t.Errorf("context of s9 = %d %s, want the prompt with the context's plan", status, body)
	}
}

func TestChatStreamRefusals(t *testing.T) {
	p := startPlatform(t)
	ctx := context.Background()
	a, _ := p.deploy(t, "hello", agenttest.Dir(t, "hello"))
	tok, err := p.c.MintRuntimeToken(ctx, a.AgentID, client.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(client.Frame) error { return nil }

	var e *client.Error
	if err := p.c.ChatStream(ctx, a.URL, p.token, client.ChatRequest{Message: "x"}, noop); !errors.As(err, &e) || e.Status != 401 || !strings.Contains(e.Message, "runtime token") {
		t.Errorf("chat with a platform token = %v, want 401 saying to mint a runtime token", err)
	}
	if err := p.c.ChatStream(ctx, p.agentURL("nobody", ""), tok.Token, client.ChatRequest{Message: "x"}, noop); !errors.As(err, &e) || e.Code != client.CodeNotFound {
		t.Errorf("chat with an unknown agent = %v, want NOT_FOUND", err)
	}
	if err := p.c.ChatStream(ctx, a.URL, tok.Token, client.ChatRequest{Message: "x", Agent: "ghost"}, noop); !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "ghost") {
		t.Errorf("chat with an unknown named agent = %v, want 400 naming it", err)
	}
	for _, bad := range []string{"hello.apps.localhost", "ftp://x", "http://"} {
		if err := p.c.ChatStream(ctx, bad, tok.Token, client.ChatRequest{}, noop); err == nil || !strings.Contains(err.Error(), "agent URL") {
			t.Errorf("ChatStream(%q) = %v, want an error about the agent URL", bad, err)
		}
	}
}

func TestChatStreamAnswers(t *testing.T) {
	ctx := context.Background()
	noop := func(client.Frame) error { return nil }
	tests := []struct {
		name, contentType, body string
		status                  int
		check                   func(error) bool
	}{
		{"turn in progress", "application/json", `{"error":"turn_in_progress"}`, 409, func(err error) bool {
			var e *client.Error
			return errors.As(err, &e) && e.Status == 409 && e.Code == "turn_in_progress"
		}},
		{"not an event stream", "application/json", `{"text":"hi"}`, 200, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "not an event stream")
		}},
		{"event stream with charset", "text/event-stream; charset=utf-8", "data: {\"type\":\"done\"}\n\n", 200, func(err error) bool {
			return err == nil
		}},
		// Answers the runtime does not give, but a proxy or a network failure can.
		{"ends before done", "text/event-stream", "data: {\"type\":\"init\",\"session_id\":\"s\"}\n\ndata: {\"type\":\"text_delta\",\"content\":\"cut", 200, func(err error) bool {
			return errors.Is(err, client.ErrStreamEnded)
		}},
		{"not JSON", "text/event-stream", "data: hello\n\n", 200, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "frame 1 is not a JSON object")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, last := rawServer(t, tt.status, tt.contentType, tt.body)
			// Any agent host: the connection goes to the platform's address.
			req := client.ChatRequest{Message: "x", SessionID: "s9", Context: map[string]string{"plan": "pro"}, Agent: "support"}
			err := client.New(srv.URL, "", nil).ChatStream(ctx, "http://x.apps.invalid:1", "rt_1", req, noop)
			if !tt.check(err) {
				t.Errorf("error = %v", err)
			}
			if last.Host != "x.apps.invalid:1" || last.Header.Get("Authorization") != "Bearer rt_1" || last.URL.Path != "/chat/stream" {
				t.Errorf("request Host %q, Authorization %q, path %q", last.Host, last.Header.Get("Authorization"), last.URL.Path)
			}
			if want := `{"message":"x","session_id":"s9","context":{"plan":"pro"},"agent":"support"}`; last.body != want {
				t.Errorf("request body = %s, want %s", last.body, want)
			}
		})
	}
}

func TestChatStreamContext(t *testing.T) {
	p := startPlatform(t)
	// The model streams a first chunk, then holds its answer open until the runtime leaves.
	model := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"Let me think"}, Hang: true})
	a, _ := p.deploy(t, "slow", writeTree(t, map[string]string{
		"svc.json": `{"name":"slow","version":"1","models":{"main":{"provider":"openai-compatible","model":"fake","baseUrl":"` + model.URL + `"}}}`,
	}))
	tok, err := p.c.MintRuntimeToken(context.Background(), a.AgentID, client.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("user pressed ctrl-c")
	var got []string
	err = p.c.ChatStream(ctx, a.URL, tok.Token, client.ChatRequest{Message: "x"}, func(f client.Frame) error {
		got = append(got, f.Type)
		if f.Type == client.FrameTextDelta {
			cancel(stop) // the user leaves while the answer streams
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("error = %v, want the ctx's cause", err)
	}
	if diff := cmp.Diff([]string{"init", "text_delta"}, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}
