package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/client"
	"svc/client/clienttest"
)

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestChatStreamThroughThePlatformAddress(t *testing.T) {
	p := clienttest.New(t)
	a := p.AddAgent("hello", client.DeploySettings{})
	ctx := context.Background()
	u, err := url.Parse(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	// The agent's host name is never resolved: both kinds of transport connect to the platform.
	transports := map[string]*http.Client{
		"default transport": nil,
		"custom transport": {Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return http.DefaultTransport.RoundTrip(r)
		})},
	}
	for name, hc := range transports {
		t.Run(name, func(t *testing.T) {
			c := client.New(p.URL(), clienttest.Token, hc)
			tok, err := c.MintRuntimeToken(ctx, a.AgentID, client.TokenRequest{TTLSeconds: 60})
			if err != nil {
				t.Fatal(err)
			}
			for _, agentURL := range []string{
				"http://hello.apps.localhost:" + u.Port(),
				"http://d123--hello.apps.localhost:" + u.Port() + "/",
			} {
				var got []client.Frame
				req := client.ChatRequest{Message: "hi", SessionID: "s9", Context: map[string]string{"k": "v"}}
				err := c.ChatStream(ctx, agentURL, tok.Token, req, func(f client.Frame) error {
					got = append(got, f)
					return nil
				})
				if err != nil {
					t.Fatalf("ChatStream(%s) = %v", agentURL, err)
				}
				types := []string{}
				for _, f := range got {
					types = append(types, f.Type)
				}
				if diff := cmp.Diff([]string{"init", "text_delta", "done"}, types); diff != "" {
					t.Errorf("frames (-want +got):\n%s", diff)
				}
				if got[0].SessionID != "s9" || got[1].Content != "echo: hi" || got[2].Reason != "model_stop" || got[2].Turns != 1 {
					t.Errorf("frames = %+v", got)
				}
			}
		})
	}
	reqs := p.ChatRequests()
	if len(reqs) == 0 || reqs[0].Context["k"] != "v" || reqs[0].SessionID != "s9" {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestChatStreamRefusals(t *testing.T) {
	p := clienttest.New(t)
	a := p.AddAgent("hello", client.DeploySettings{})
	ctx := context.Background()
	c := client.New(p.URL(), clienttest.Token, nil)
	u, _ := url.Parse(p.URL())
	agentURL := "http://hello.apps.localhost:" + u.Port()
	tok, err := c.MintRuntimeToken(ctx, a.AgentID, client.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(client.Frame) error { return nil }

	var e *client.Error
	if err := c.ChatStream(ctx, agentURL, clienttest.Token, client.ChatRequest{Message: "x"}, noop); !errors.As(err, &e) || e.Status != 401 {
		t.Errorf("chat with a platform token = %v, want 401", err)
	}
	if err := c.ChatStream(ctx, "http://nobody.apps.localhost:"+u.Port(), tok.Token, client.ChatRequest{Message: "x"}, noop); !errors.As(err, &e) || e.Code != client.CodeNotFound {
		t.Errorf("chat with an unknown agent = %v, want NOT_FOUND", err)
	}
	for _, bad := range []string{"hello.apps.localhost", "ftp://x", "http://"} {
		if err := c.ChatStream(ctx, bad, tok.Token, client.ChatRequest{}, noop); err == nil || !strings.Contains(err.Error(), "agent URL") {
			t.Errorf("ChatStream(%q) = %v, want an error about the agent URL", bad, err)
		}
	}

	scripts := []struct {
		name   string
		chat   func(client.ChatRequest, func(string))
		want   error
		errHas string
	}{
		{"ends before done", func(_ client.ChatRequest, write func(string)) {
			write(clienttest.Frame(map[string]any{"type": "init", "session_id": "s"}))
			write("data: {\"type\":\"text_delta\",\"content\":\"cut")
		}, client.ErrStreamEnded, ""},
		{"not JSON", func(_ client.ChatRequest, write func(string)) { write("data: hello\n\n") }, nil, "frame 1 is not a JSON object"},
	}
	for _, s := range scripts {
		t.Run(s.name, func(t *testing.T) {
			p.SetChat(s.chat)
			err := c.ChatStream(ctx, agentURL, tok.Token, client.ChatRequest{Message: "x"}, noop)
			if (s.want != nil && !errors.Is(err, s.want)) || (s.errHas != "" && (err == nil || !strings.Contains(err.Error(), s.errHas))) {
				t.Errorf("error = %v, want %v %q", err, s.want, s.errHas)
			}
		})
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, last := rawServer(t, tt.status, tt.contentType, tt.body)
			// Any agent host: the connection goes to the platform's address.
			err := client.New(srv.URL, "", nil).ChatStream(ctx, "http://x.apps.invalid:1", "rt_1", client.ChatRequest{Message: "x"}, noop)
			if !tt.check(err) {
				t.Errorf("error = %v", err)
			}
			if last.Host != "x.apps.invalid:1" || last.Header.Get("Authorization") != "Bearer rt_1" || last.URL.Path != "/chat/stream" {
				t.Errorf("request Host %q, Authorization %q, path %q", last.Host, last.Header.Get("Authorization"), last.URL.Path)
			}
		})
	}
}

func TestChatStreamContext(t *testing.T) {
	p := clienttest.New(t)
	a := p.AddAgent("hello", client.DeploySettings{})
	c := client.New(p.URL(), clienttest.Token, nil)
	u, _ := url.Parse(p.URL())
	tok, err := c.MintRuntimeToken(context.Background(), a.AgentID, client.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("user pressed ctrl-c")
	release := make(chan struct{})
	p.SetChat(func(_ client.ChatRequest, write func(string)) {
		write(clienttest.Frame(map[string]any{"type": "init", "session_id": "s"}))
		<-release
	})
	defer close(release)
	err = c.ChatStream(ctx, "http://hello.apps.localhost:"+u.Port(), tok.Token, client.ChatRequest{Message: "x"}, func(f client.Frame) error {
		cancel(stop) // the user leaves after the first frame
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("error = %v, want the ctx's cause", err)
	}
}
