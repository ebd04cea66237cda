package models_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/models"
	"svc/runner/models/modelstest"
)

// conversation exercises every message kind.
func conversation() models.Request {
	return models.Request{
		Model:     "override-model",
		System:    "You are terse.",
		MaxTokens: 300,
		Effort:    models.EffortHigh,
		Messages: []models.Message{
			{Role: models.RoleUser, Content: "Look at these", Parts: []models.Part{
				{MimeType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}, Filename: "a.png"},
				{MimeType: "application/pdf", Data: []byte("%PDF-1.4"), Filename: "doc.pdf"},
				{MimeType: "text/markdown; charset=utf-8", Data: []byte("# Notes"), Filename: "notes.md"},
			}},
			{Role: models.RoleAssistant, Content: "Reading.", Thinking: "hmm", ThinkingSignature: "sig-1", ToolCalls: []models.ToolCall{
				{ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"a"}`)},
				{ID: "call_2", Name: "list", Arguments: nil},
			}},
			{Role: models.RoleTool, ToolCallID: "call_1", ToolName: "read", Content: "file a"},
			{Role: models.RoleTool, ToolCallID: "call_2", ToolName: "list", Content: "denied", IsError: true},
			{Role: models.RoleUser, Content: "thanks"},
		},
	}
}

func TestOpenAIRequestEncoding(t *testing.T) {
	s := modelstest.NewOpenAIServer(t)
	p := models.NewOpenAI(models.OpenAIConfig{APIKey: testKey, BaseURL: s.URL, HTTPClient: s.Client(), Model: "gpt-test"})
	if _, err := p.Stream(context.Background(), conversation(), (&recorder{}).emit); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	got := s.Requests()[0]
	if got.Path != "/v1/chat/completions" {
		t.Errorf("path = %q", got.Path)
	}
	if auth := got.Header.Get("Authorization"); auth != "Bearer "+testKey {
		t.Errorf("Authorization = %q", auth)
	}
	png := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte{0x89, 'P', 'N', 'G'})
	pdf := "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte("%PDF-1.4"))
	want := map[string]any{
		"model":                 "override-model",
		"stream":                true,
		"stream_options":        map[string]any{"include_usage": true},
		"reasoning_effort":      "high",
		"max_completion_tokens": 300.0,
		"messages": []any{
			map[string]any{"role": "system", "content": "You are terse."},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "Look at these"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": png}},
				map[string]any{"type": "file", "file": map[string]any{"file_data": pdf, "filename": "doc.pdf"}},
				map[string]any{"type": "text", "text": "File notes.md:\n# Notes"},
			}},
			map[string]any{"role": "assistant", "content": "Reading.", "tool_calls": []any{
				map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "read", "arguments": `{"path":"a"}`}},
				map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "list", "arguments": `{}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "file a"},
			map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "Error: denied"},
			map[string]any{"role": "user", "content": "thanks"},
		},
	}
	if diff := cmp.Diff(want, got.JSON); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestOpenAICompatibleDefaults(t *testing.T) {
	s := modelstest.NewOpenAIServer(t, modelstest.Turn{
		Reasoning: []string{"thinking via ", "reasoning field"}, ReasoningField: "reasoning", Text: []string{"ok"},
	})
	p, err := models.New(models.Config{
		Provider: models.ProviderOpenAICompatible, Model: "llama3", BaseURL: s.URL, Effort: models.EffortLow,
	}, s.Client())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var rec recorder
	resp, err := p.Stream(context.Background(), models.Request{
		MaxTokens: 50, Messages: []models.Message{{Role: models.RoleUser, Content: "hi"}},
	}, rec.emit)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Message.Thinking != "thinking via reasoning field" {
		t.Errorf("Thinking = %q", resp.Message.Thinking)
	}
	body := s.Requests()[0]
	if body.JSON["model"] != "llama3" || body.JSON["max_tokens"] != 50.0 || body.JSON["reasoning_effort"] != "low" {
		t.Errorf("model, max_tokens, reasoning_effort = %v, %v, %v", body.JSON["model"], body.JSON["max_tokens"], body.JSON["reasoning_effort"])
	}
	if _, ok := body.JSON["max_completion_tokens"]; ok {
		t.Error("max_completion_tokens sent to a compatible server")
	}
	if auth := body.Header.Get("Authorization"); auth != "" {
		t.Errorf("Authorization = %q, want none without a key", auth)
	}
}

func TestOpenAIToolCallEdgeCases(t *testing.T) {
	s := modelstest.NewOpenAIServer(t, modelstest.Turn{ToolCalls: []modelstest.ToolCall{
		{ID: "", Name: "a", Arguments: `{"x":1}`},        // a server that sends no id
		{ID: "call_z", Name: "b", Arguments: `{"x": tr`}, // truncated arguments
	}, StopReason: "stop"}) // a server that says stop after tool calls
	p := models.NewOpenAI(models.OpenAIConfig{BaseURL: s.URL, HTTPClient: s.Client(), Model: "m"})
	resp, err := p.Stream(context.Background(), userRequest("go"), (&recorder{}).emit)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []models.ToolCall{
		{ID: "call_1", Name: "a", Arguments: json.RawMessage(`{"x":1}`)},
		{ID: "call_z", Name: "b", Arguments: json.RawMessage(`"{\"x\": tr"`)},
	}
	if diff := cmp.Diff(want, resp.Message.ToolCalls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if resp.StopReason != "tool_calls" {
		t.Errorf("StopReason = %q, want tool_calls", resp.StopReason)
	}
	if _, err := json.Marshal(resp.Message); err != nil {
		t.Errorf("the message does not marshal: %v", err)
	}
}

func TestOpenAIStopReasons(t *testing.T) {
	for wire, want := range map[string]string{"length": "length", "content_filter": "content_filter", "weird": "stop"} {
		s := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"x"}, StopReason: wire})
		p := models.NewOpenAI(models.OpenAIConfig{BaseURL: s.URL, HTTPClient: s.Client(), Model: "m"})
		resp, err := p.Stream(context.Background(), userRequest("go"), (&recorder{}).emit)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if resp.StopReason != want {
			t.Errorf("finish_reason %q: StopReason = %q, want %q", wire, resp.StopReason, want)
		}
	}
}

// BenchmarkOpenAIStream32 measures one streamed call of 32 text chunks against a local server
// answering a precomputed stream.
func BenchmarkOpenAIStream32(b *testing.B) {
	s := modelstest.NewOpenAIBenchServer(b, 32)
	p := models.NewOpenAI(models.OpenAIConfig{BaseURL: s.URL, HTTPClient: s.Client(), Model: "m"})
	req := userRequest("hello")
	emit := func(models.Event) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Stream(ctx, req, emit)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Usage.OutputTokens != 32 {
			b.Fatalf("usage = %+v", resp.Usage)
		}
	}
}

func TestOpenAIBadBaseURL(t *testing.T) {
	for _, base := range []string{"localhost:8000/v1", "ftp://host/v1", "http://[::1"} {
		p := models.NewOpenAI(models.OpenAIConfig{BaseURL: base, Model: "m"})
		_, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit)
		if !errors.Is(err, models.ErrBadRequest) || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("base URL %q: error = %v, want ErrBadRequest naming the base URL", base, err)
		}
	}
}

func TestOpenAIReusesConnections(t *testing.T) {
	s := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"a"}}, modelstest.Turn{Text: []string{"b"}}, modelstest.Turn{Text: []string{"c"}})
	var dials atomic.Int32
	var d net.Dialer
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}}
	defer client.CloseIdleConnections()
	p := models.NewOpenAI(models.OpenAIConfig{BaseURL: s.URL, HTTPClient: client, Model: "m"})
	for range 3 {
		if _, err := p.Stream(context.Background(), userRequest("hi"), (&recorder{}).emit); err != nil {
			t.Fatalf("Stream: %v", err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for 3 calls, want 1 (the stream must be read to its end)", n)
	}
}
