package runtime_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"svc/agent"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
)

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A model of provider openai or anthropic without an API key is not available: the turn ends
// with an error frame naming the variable to set, and nothing is sent, where before the
// conversation went to the provider's public API without credentials. With the key (an agent
// secret or the environment, both reach the runtime through Env) the call goes to the
// configured base URL with it. openai-compatible, and openai or anthropic with a base URL of
// the operator's own (a gateway that adds the key), may go without one.
func TestModelWithoutKey(t *testing.T) {
	// A client that would reach the public APIs: every request through it fails the test.
	var public atomic.Int64
	nowhere := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		public.Add(1)
		return nil, errors.New("no network in this test: " + r.URL.Host)
	})}
	start := func(t *testing.T, ag *agent.Agent, def agent.ModelRef, env map[string]string, client *http.Client) *env {
		t.Helper()
		if ag == nil {
			ag = loadAgent(t, "hello")
		}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		return start(t, runtime.Options{Agent: ag, DefaultModel: def, Env: lookup, Models: runtime.NewModels(lookup, client)})
	}
	refused := func(t *testing.T, e *env, body map[string]any, variable string) {
		t.Helper()
		fs := e.chat("", body)
		errs := ofType(fs, "error")
		if len(errs) != 1 || done(t, fs)["reason"] != "error" {
			t.Fatalf("frames %v, want one error and done reason error", types(fs))
		}
		msg := str(errs[0].Data["message"])
		if !strings.Contains(msg, "is not available") || !strings.Contains(msg, variable+" is not set") {
			t.Errorf("error %q, want the model not available, naming %s", msg, variable)
		}
	}

	t.Run("openai default model, no key", func(t *testing.T) {
		e := start(t, nil, agent.ModelRef{Provider: "openai", Model: "gpt-4o"}, nil, nowhere)
		refused(t, e, map[string]any{"message": "my secret plans"}, "OPENAI_API_KEY")
	})
	t.Run("anthropic chosen by the request, no key", func(t *testing.T) {
		e := start(t, nil, agent.ModelRef{}, nil, nowhere)
		refused(t, e, map[string]any{"message": "hi", "model": map[string]any{"provider": "anthropic", "model": "claude-sonnet-4-5"}}, "ANTHROPIC_API_KEY")
	})
	t.Run("openai models.main, no key", func(t *testing.T) {
		ag := loadAgent(t, "hello")
		ag.Config.Models = map[string]agent.ModelRef{"main": {Provider: "openai", Model: "gpt-4.1"}}
		e := start(t, ag, agent.ModelRef{}, nil, nowhere)
		refused(t, e, map[string]any{"message": "hi"}, "OPENAI_API_KEY")
	})
	t.Run("models.main apiKey unset", func(t *testing.T) {
		ag := loadAgent(t, "hello")
		ag.Config.Models = map[string]agent.ModelRef{"main": {Provider: "anthropic", Model: "claude-sonnet-4-5", APIKey: "env:DESK_ANTHROPIC_KEY"}}
		e := start(t, ag, agent.ModelRef{}, map[string]string{"ANTHROPIC_API_KEY": "sk-ant-other"}, nowhere)
		refused(t, e, map[string]any{"message": "hi"}, "apiKey: env:DESK_ANTHROPIC_KEY")
	})
	t.Run("openai base URL of the public API named, no key", func(t *testing.T) {
		e := start(t, nil, agent.ModelRef{Provider: "openai", Model: "gpt-4o"}, map[string]string{"OPENAI_BASE_URL": "https://API.openai.com/v1"}, nowhere)
		refused(t, e, map[string]any{"message": "hi"}, "OPENAI_API_KEY")
	})
	if n := public.Load(); n != 0 {
		t.Fatalf("%d requests went out without a key", n)
	}

	t.Run("openai with the key", func(t *testing.T) {
		srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"keyed"}})
		e := start(t, nil, agent.ModelRef{Provider: "openai", Model: "gpt-4o"},
			map[string]string{"OPENAI_API_KEY": "sk-test-123", "OPENAI_BASE_URL": srv.URL}, srv.Client())
		if fs := e.chat("", map[string]any{"message": "hi"}); text(fs) != "keyed" {
			t.Fatalf("frames %v", types(fs))
		}
		if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer sk-test-123" {
			t.Errorf("Authorization = %q", got)
		}
	})
	t.Run("anthropic with the key", func(t *testing.T) {
		srv := modelstest.NewAnthropicServer(t, modelstest.Turn{Text: []string{"keyed"}})
		e := start(t, nil, agent.ModelRef{},
			map[string]string{"ANTHROPIC_API_KEY": "sk-ant-123", "ANTHROPIC_BASE_URL": srv.URL}, srv.Client())
		fs := e.chat("", map[string]any{"message": "hi", "model": map[string]any{"provider": "anthropic", "model": "claude-sonnet-4-5"}})
		if text(fs) != "keyed" {
			t.Fatalf("frames %v", types(fs))
		}
		if h := srv.Requests()[0].Header; h.Get("X-Api-Key") != "sk-ant-123" && h.Get("Authorization") != "Bearer sk-ant-123" {
			t.Errorf("the key was not sent: headers %v", h)
		}
	})
	t.Run("openai-compatible without a key", func(t *testing.T) {
		srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"local"}})
		ag := loadAgent(t, "hello")
		ag.Config.Models = map[string]agent.ModelRef{"main": {Provider: "openai-compatible", Model: "llama3", BaseURL: srv.URL}}
		e := start(t, ag, agent.ModelRef{}, nil, srv.Client())
		if fs := e.chat("", map[string]any{"message": "hi"}); text(fs) != "local" {
			t.Fatalf("frames %v", types(fs))
		}
		if got := srv.Requests()[0].Header.Get("Authorization"); got != "" {
			t.Errorf("Authorization = %q, want none", got)
		}
	})
	t.Run("openai through a gateway of one's own, without a key", func(t *testing.T) {
		srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"gateway"}})
		e := start(t, nil, agent.ModelRef{Provider: "openai", Model: "gpt-4o"}, map[string]string{"OPENAI_BASE_URL": srv.URL}, srv.Client())
		if fs := e.chat("", map[string]any{"message": "hi"}); text(fs) != "gateway" {
			t.Fatalf("frames %v", types(fs))
		}
	})
}
