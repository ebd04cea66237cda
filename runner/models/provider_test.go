package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/models"
	"svc/runner/models/modelstest"
)

// testKey is the API key of the tests; no error message may contain it.
const testKey = "sk-test-secret-key-1234"

// fakeAPI pairs a fake server with a provider talking to it.
type fakeAPI struct {
	name      string
	newServer func(testing.TB, ...modelstest.Turn) *modelstest.Server
	// newProvider builds the provider for s; maxRetries 0 keeps the default.
	newProvider func(s *modelstest.Server, maxRetries int) models.Provider
	// toolStop and endStop are the wire stop reasons of the API.
	toolStop, endStop string
}

// fakeAPIs lists the HTTP providers; every test of this file runs against each.
func fakeAPIs() []fakeAPI {
	return []fakeAPI{
		{
			name:      "openai",
			newServer: modelstest.NewOpenAIServer,
			newProvider: func(s *modelstest.Server, maxRetries int) models.Provider {
				return models.NewOpenAI(models.OpenAIConfig{
					APIKey: testKey, BaseURL: s.URL, HTTPClient: s.Client(), Model: "gpt-test",
					MaxRetries: maxRetries, RetryBaseDelay: time.Millisecond,
				})
			},
		},
		{
			name:      "anthropic",
			newServer: modelstest.NewAnthropicServer,
			newProvider: func(s *modelstest.Server, maxRetries int) models.Provider {
				return models.NewAnthropic(models.AnthropicConfig{
					APIKey: testKey, BaseURL: s.URL, HTTPClient: s.Client(), Model: "claude-test",
					MaxRetries: maxRetries, RetryBaseDelay: time.Millisecond,
				})
			},
		},
	}
}

// recorder collects the events of a stream.
type recorder struct {
	events []models.Event
	// onEvent, when set, runs after each event is recorded; its error is returned to the provider.
	onEvent func(models.Event) error
}

func (r *recorder) emit(ev models.Event) error {
	if ev.ToolCall != nil {
		tc := *ev.ToolCall
		ev.ToolCall = &tc
	}
	r.events = append(r.events, ev)
	if r.onEvent != nil {
		return r.onEvent(ev)
	}
	return nil
}

// text joins the deltas of one type.
func (r *recorder) text(typ models.EventType) string {
	var b strings.Builder
	for _, ev := range r.events {
		if ev.Type == typ {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// calls lists the tool calls emitted.
func (r *recorder) calls() []models.ToolCall {
	var out []models.ToolCall
	for _, ev := range r.events {
		if ev.Type == models.EventToolCall {
			out = append(out, *ev.ToolCall)
		}
	}
	return out
}

// userRequest is a one-message request.
func userRequest(text string) models.Request {
	return models.Request{System: "be brief", Messages: []models.Message{{Role: models.RoleUser, Content: text}}}
}

func TestStreamText(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t, modelstest.Turn{
				Text:  []string{"Hel", "lo, ", "wor", "ld", "!"},
				Usage: modelstest.Usage{InputTokens: 12, OutputTokens: 5, CachedTokens: 4},
			})
			p := api.newProvider(s, 0)
			var rec recorder
			resp, err := p.Stream(context.Background(), userRequest("hi"), rec.emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			var deltas []string
			for _, ev := range rec.events {
				if ev.Type != models.EventTextDelta {
					t.Errorf("unexpected event %+v", ev)
				}
				deltas = append(deltas, ev.Text)
			}
			if diff := cmp.Diff([]string{"Hel", "lo, ", "wor", "ld", "!"}, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			want := models.Response{
				Message:    models.Message{Role: models.RoleAssistant, Content: "Hello, world!"},
				Usage:      models.Usage{InputTokens: 12, OutputTokens: 5, CachedTokens: 4},
				StopReason: "stop",
			}
			if diff := cmp.Diff(want, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if got := s.Calls(); got != 1 {
				t.Errorf("Calls() = %d, want 1", got)
			}
		})
	}
}

func TestStreamToolCallSplitAcrossChunks(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			args := `{"city":"Zürich","days":[1,2,3],"note":"naïve \"quoted\""}`
			s := api.newServer(t, modelstest.Turn{
				Text:      []string{"Let me check."},
				ToolCalls: []modelstest.ToolCall{{ID: "call_abc", Name: "weather", Arguments: args}},
			})
			p := api.newProvider(s, 0)
			req := userRequest("weather?")
			req.Tools = []models.ToolSpec{{
				Name: "weather", Description: "Get the weather",
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
			}}
			var rec recorder
			resp, err := p.Stream(context.Background(), req, rec.emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			wantCalls := []models.ToolCall{{ID: "call_abc", Name: "weather", Arguments: json.RawMessage(args)}}
			if diff := cmp.Diff(wantCalls, rec.calls()); diff != "" {
				t.Errorf("emitted calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantCalls, resp.Message.ToolCalls); diff != "" {
				t.Errorf("response calls (-want +got):\n%s", diff)
			}
			if resp.StopReason != "tool_calls" || resp.Message.Content != "Let me check." {
				t.Errorf("StopReason, Content = %q, %q; want tool_calls, Let me check.", resp.StopReason, resp.Message.Content)
			}
			// The tool was offered with its schema.
			body := s.Requests()[0].JSON
			tools, _ := body["tools"].([]any)
			if len(tools) != 1 || !strings.Contains(mustJSON(t, tools[0]), `"city"`) || !strings.Contains(mustJSON(t, tools[0]), `"weather"`) {
				t.Errorf("tools sent = %s", mustJSON(t, body["tools"]))
			}
		})
	}
}

func TestStreamParallelToolCalls(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t, modelstest.Turn{
				Interleave: true,
				ToolCalls: []modelstest.ToolCall{
					{ID: "call_1", Name: "read", Arguments: `{"path":"a.txt","lines":10}`},
					{ID: "call_2", Name: "read", Arguments: `{"path":"b.txt","lines":20}`},
					{ID: "call_3", Name: "list", Arguments: ``},
				},
			})
			p := api.newProvider(s, 0)
			var rec recorder
			resp, err := p.Stream(context.Background(), userRequest("read both"), rec.emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			want := []models.ToolCall{
				{ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.txt","lines":10}`)},
				{ID: "call_2", Name: "read", Arguments: json.RawMessage(`{"path":"b.txt","lines":20}`)},
				{ID: "call_3", Name: "list", Arguments: json.RawMessage(`{}`)},
			}
			if diff := cmp.Diff(want, rec.calls()); diff != "" {
				t.Errorf("emitted calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, resp.Message.ToolCalls); diff != "" {
				t.Errorf("response calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamReasoning(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t, modelstest.Turn{
				Reasoning: []string{"The user ", "greets me."},
				Text:      []string{"Hi!"},
				Signature: "sig-123",
			})
			p := api.newProvider(s, 0)
			req := userRequest("hello")
			req.Effort = models.EffortLow
			var rec recorder
			resp, err := p.Stream(context.Background(), req, rec.emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if got := rec.text(models.EventThinkingDelta); got != "The user greets me." {
				t.Errorf("thinking deltas = %q", got)
			}
			if rec.events[0].Type != models.EventThinkingDelta {
				t.Errorf("first event = %+v, want thinking", rec.events[0])
			}
			if resp.Message.Thinking != "The user greets me." || resp.Message.Content != "Hi!" {
				t.Errorf("message = %+v", resp.Message)
			}
		})
	}
}

func TestRetryThenSuccess(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t,
				modelstest.Turn{Status: http.StatusTooManyRequests},
				modelstest.Turn{Status: http.StatusServiceUnavailable},
				modelstest.Turn{Text: []string{"ok"}},
			)
			p := api.newProvider(s, 0)
			var rec recorder
			resp, err := p.Stream(context.Background(), userRequest("hi"), rec.emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if resp.Message.Content != "ok" || len(rec.events) != 1 {
				t.Errorf("content %q, %d events; want ok, 1", resp.Message.Content, len(rec.events))
			}
			if got := s.Calls(); got != 3 {
				t.Errorf("Calls() = %d, want 3", got)
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t, modelstest.Turn{Status: http.StatusInternalServerError, ErrorMessage: "boom"})
			p := api.newProvider(s, 0)
			_, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit)
			var apiErr *models.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error = %v (%T), want *APIError", err, err)
			}
			if apiErr.StatusCode != 500 || !apiErr.Retryable || apiErr.Message != "boom" || apiErr.Provider != api.name {
				t.Errorf("APIError = %+v", apiErr)
			}
			if got, want := s.Calls(), 1+models.DefaultMaxRetries; got != want {
				t.Errorf("Calls() = %d, want %d", got, want)
			}
		})
	}
}

func TestMaxRetriesConfig(t *testing.T) {
	for _, api := range fakeAPIs() {
		for _, tc := range []struct {
			maxRetries, calls int
		}{{-1, 1}, {1, 2}, {5, 6}} {
			t.Run(api.name, func(t *testing.T) {
				s := api.newServer(t, modelstest.Turn{Status: http.StatusBadGateway})
				p := api.newProvider(s, tc.maxRetries)
				if _, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit); err == nil {
					t.Fatal("Stream succeeded, want an error")
				}
				if got := s.Calls(); got != tc.calls {
					t.Errorf("MaxRetries %d: Calls() = %d, want %d", tc.maxRetries, got, tc.calls)
				}
			})
		}
	}
}

func TestUnauthorizedNotRetriedAndKeyRedacted(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t, modelstest.Turn{
				Status: http.StatusUnauthorized, ErrorMessage: "Incorrect API key provided: " + testKey + ".",
			})
			p := api.newProvider(s, 0)
			_, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit)
			var apiErr *models.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Retryable {
				t.Fatalf("error = %#v, want a non-retryable 401 APIError", err)
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(apiErr.Message, testKey) {
				t.Errorf("error %q contains the API key", err)
			}
			if !strings.Contains(err.Error(), "Incorrect API key provided") {
				t.Errorf("error %q lost the API's message", err)
			}
			if got := s.Calls(); got != 1 {
				t.Errorf("Calls() = %d, want 1", got)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name+"/short wait is honoured", func(t *testing.T) {
			s := api.newServer(t,
				modelstest.Turn{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After-Ms": "1"}},
				modelstest.Turn{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "0"}},
				modelstest.Turn{Text: []string{"ok"}},
			)
			p := api.newProvider(s, 0)
			if _, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit); err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if got := s.Calls(); got != 3 {
				t.Errorf("Calls() = %d, want 3", got)
			}
		})
		t.Run(api.name+"/wait above the limit fails at once", func(t *testing.T) {
			s := api.newServer(t, modelstest.Turn{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "30"}})
			p := api.newProvider(s, 0)
			_, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit)
			var apiErr *models.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error = %v, want *APIError", err)
			}
			if apiErr.StatusCode != 429 || !apiErr.Retryable || apiErr.RetryAfter != 30*time.Second {
				t.Errorf("APIError = %+v, want 429, retryable, RetryAfter 30s", apiErr)
			}
			if got := s.Calls(); got != 1 {
				t.Errorf("Calls() = %d, want 1", got)
			}
		})
	}
}

func TestStreamErrorEvent(t *testing.T) {
	streamErr := map[string]string{"openai": "server_error", "anthropic": "overloaded_error"}
	for _, api := range fakeAPIs() {
		t.Run(api.name+"/before the first event it is retried", func(t *testing.T) {
			s := api.newServer(t,
				modelstest.Turn{StreamError: streamErr[api.name]},
				modelstest.Turn{Text: []string{"fine"}},
			)
			p := api.newProvider(s, 0)
			resp, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if resp.Message.Content != "fine" || s.Calls() != 2 {
				t.Errorf("content %q after %d calls, want fine after 2", resp.Message.Content, s.Calls())
			}
		})
		t.Run(api.name+"/after an event it is returned", func(t *testing.T) {
			s := api.newServer(t,
				modelstest.Turn{Text: []string{"partial"}, StreamError: streamErr[api.name], ErrorMessage: "overloaded now"},
				modelstest.Turn{Text: []string{"never"}},
			)
			p := api.newProvider(s, 0)
			var rec recorder
			resp, err := p.Stream(context.Background(), userRequest("hi"), rec.emit)
			var apiErr *models.APIError
			if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "overloaded now") {
				t.Fatalf("error = %v, want an APIError with the stream's message", err)
			}
			if s.Calls() != 1 || rec.text(models.EventTextDelta) != "partial" || resp.Message.Content != "partial" {
				t.Errorf("calls %d, emitted %q, response %q; want 1, partial, partial",
					s.Calls(), rec.text(models.EventTextDelta), resp.Message.Content)
			}
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	errAbort := errors.New("user abort")
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t, modelstest.Turn{Text: []string{"one ", "two "}, Hang: true})
			p := api.newProvider(s, 0)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			rec := recorder{onEvent: func(models.Event) error {
				cancel(errAbort)
				return nil
			}}
			_, err := p.Stream(ctx, userRequest("hi"), rec.emit)
			if !errors.Is(err, errAbort) {
				t.Fatalf("error = %v, want it to wrap the cancel cause", err)
			}
			if got := s.Calls(); got != 1 {
				t.Errorf("Calls() = %d, want 1", got)
			}
		})
	}
}

func TestCancelledBeforeCall(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t)
			p := api.newProvider(s, 0)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := p.Stream(ctx, userRequest("hi"), (&recorder{}).emit)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error = %v, want context.Canceled", err)
			}
		})
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			// Retry-After 5s is under the limit, so the provider waits: the cancel must end the wait.
			s := api.newServer(t, modelstest.Turn{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "5"}})
			p := api.newProvider(s, 0)
			ctx, cancel := context.WithCancelCause(context.Background())
			errStop := errors.New("stop waiting")
			done := make(chan error, 1)
			go func() {
				_, err := p.Stream(ctx, userRequest("hi"), (&recorder{}).emit)
				done <- err
			}()
			for s.Calls() == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel(errStop)
			if err := <-done; !errors.Is(err, errStop) {
				t.Fatalf("error = %v, want it to wrap the cancel cause", err)
			}
			if got := s.Calls(); got != 1 {
				t.Errorf("Calls() = %d, want 1", got)
			}
		})
	}
}

func TestEmitErrorStopsTheCall(t *testing.T) {
	errFull := errors.New("client gone")
	for _, api := range fakeAPIs() {
		t.Run(api.name, func(t *testing.T) {
			s := api.newServer(t, modelstest.Turn{Text: []string{"a", "b", "c"}})
			p := api.newProvider(s, 0)
			rec := recorder{onEvent: func(models.Event) error { return errFull }}
			_, err := p.Stream(context.Background(), userRequest("hi"), rec.emit)
			if err != errFull { //nolint:errorlint // the contract is "returned as is"
				t.Fatalf("error = %v, want the emit error as is", err)
			}
			if len(rec.events) != 1 || s.Calls() != 1 {
				t.Errorf("%d events after %d calls, want 1 and 1", len(rec.events), s.Calls())
			}
		})
	}
}

func TestBadRequestsMakeNoCall(t *testing.T) {
	for _, api := range fakeAPIs() {
		for name, req := range map[string]models.Request{
			"effort": {Effort: "extreme", Messages: []models.Message{{Role: models.RoleUser, Content: "x"}}},
			"part type": {Messages: []models.Message{{Role: models.RoleUser, Parts: []models.Part{
				{MimeType: "application/zip", Data: []byte("PK"), Filename: "a.zip"}}}}},
			"part on assistant": {Messages: []models.Message{{Role: models.RoleAssistant, Parts: []models.Part{
				{MimeType: "image/png", Data: []byte{1}}}}}},
			"empty part": {Messages: []models.Message{{Role: models.RoleUser, Parts: []models.Part{
				{MimeType: "image/png", Filename: "x.png"}}}}},
			"role":         {Messages: []models.Message{{Role: "system", Content: "x"}}},
			"tool call id": {Messages: []models.Message{{Role: models.RoleTool, Content: "x"}}},
			"tool schema": {Messages: []models.Message{{Role: models.RoleUser, Content: "x"}},
				Tools: []models.ToolSpec{{Name: "t", Parameters: json.RawMessage(`[1]`)}}},
			"tool name": {Messages: []models.Message{{Role: models.RoleUser, Content: "x"}},
				Tools: []models.ToolSpec{{}}},
		} {
			t.Run(api.name+"/"+name, func(t *testing.T) {
				s := api.newServer(t)
				p := api.newProvider(s, 0)
				_, err := p.Stream(context.Background(), req, (&recorder{}).emit)
				if !errors.Is(err, models.ErrBadRequest) {
					t.Fatalf("error = %v, want ErrBadRequest", err)
				}
				if s.Calls() != 0 {
					t.Errorf("Calls() = %d, want 0", s.Calls())
				}
			})
		}
	}
}

func TestConnectionRefusedIsRetriedThenAPIError(t *testing.T) {
	p := models.NewOpenAI(models.OpenAIConfig{
		APIKey: testKey, BaseURL: "http://127.0.0.1:1/v1", Model: "m", MaxRetries: 1, RetryBaseDelay: time.Millisecond,
		HTTPClient: &http.Client{Transport: &http.Transport{}},
	})
	_, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit)
	var apiErr *models.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 0 || !apiErr.Retryable {
		t.Fatalf("error = %#v, want a retryable APIError without status", err)
	}
}

// mustJSON marshals v for messages and substring checks.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}
