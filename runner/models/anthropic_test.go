package models_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/models"
	"svc/runner/models/modelstest"
)

func TestAnthropicRequestEncoding(t *testing.T) {
	s := modelstest.NewAnthropicServer(t)
	p := models.NewAnthropic(models.AnthropicConfig{APIKey: testKey, BaseURL: s.URL, HTTPClient: s.Client(), Model: "claude-test"})
	if _, err := p.Stream(context.Background(), conversation(), (&recorder{}).emit); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	got := s.Requests()[0]
	if got.Path != "/v1/messages" {
		t.Errorf("path = %q", got.Path)
	}
	// SDK v2 sends the API key as a bearer token.
	if auth := got.Header.Get("Authorization"); auth != "Bearer "+testKey {
		t.Errorf("Authorization = %q", auth)
	}
	ephemeral := map[string]any{"type": "ephemeral"}
	want := map[string]any{
		"model":      "override-model",
		"stream":     true,
		"max_tokens": float64(300 + models.ThinkingBudget(models.EffortHigh)),
		"thinking":   map[string]any{"type": "enabled", "budget_tokens": float64(models.ThinkingBudget(models.EffortHigh))},
		"system":     []any{map[string]any{"type": "text", "text": "You are terse.", "cache_control": ephemeral}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "Look at these"},
				map[string]any{"type": "image", "source": map[string]any{
					"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString([]byte{0x89, 'P', 'N', 'G'}),
				}},
				map[string]any{"type": "document", "title": "doc.pdf", "source": map[string]any{
					"type": "base64", "media_type": "application/pdf", "data": base64.StdEncoding.EncodeToString([]byte("%PDF-1.4")),
				}},
				map[string]any{"type": "document", "title": "notes.md", "source": map[string]any{
					"type": "text", "media_type": "text/plain", "data": "# Notes",
				}},
			}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
				map[string]any{"type": "text", "text": "Reading."},
				map[string]any{"type": "tool_use", "id": "call_1", "name": "read", "input": map[string]any{"path": "a"}},
				map[string]any{"type": "tool_use", "id": "call_2", "name": "list", "input": map[string]any{}},
			}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "call_1", "content": []any{map[string]any{"type": "text", "text": "file a"}}},
				map[string]any{"type": "tool_result", "tool_use_id": "call_2", "is_error": true, "content": []any{map[string]any{"type": "text", "text": "denied"}}},
				map[string]any{"type": "text", "text": "thanks", "cache_control": ephemeral},
			}},
		},
	}
	if diff := cmp.Diff(want, got.JSON); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestAnthropicDefaults(t *testing.T) {
	s := modelstest.NewAnthropicServer(t)
	p, err := models.New(models.Config{Provider: models.ProviderAnthropic, Model: "claude-x", BaseURL: s.URL, APIKey: testKey}, s.Client())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	req := models.Request{Messages: []models.Message{
		{Role: models.RoleUser, Content: "hi"},
		// thinking without a signature (from another provider) is not sent back
		{Role: models.RoleAssistant, Content: "hello", Thinking: "unsigned"},
		{Role: models.RoleUser, Content: "again"},
	}}
	if _, err := p.Stream(context.Background(), req, (&recorder{}).emit); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	body := s.Requests()[0].JSON
	if body["model"] != "claude-x" || body["max_tokens"] != float64(models.DefaultAnthropicMaxTokens) {
		t.Errorf("model, max_tokens = %v, %v", body["model"], body["max_tokens"])
	}
	for _, key := range []string{"thinking", "system", "tools"} {
		if _, ok := body[key]; ok {
			t.Errorf("%s sent without being asked for", key)
		}
	}
	want := []any{map[string]any{"type": "text", "text": "hello"}}
	msgs := body["messages"].([]any)
	if diff := cmp.Diff(want, msgs[1].(map[string]any)["content"]); diff != "" {
		t.Errorf("assistant content (-want +got):\n%s", diff)
	}
}

func TestAnthropicThinkingSignatureReturned(t *testing.T) {
	s := modelstest.NewAnthropicServer(t, modelstest.Turn{
		Reasoning: []string{"plan"}, Signature: "EqQBCkYIBxgCKkA",
		ToolCalls: []modelstest.ToolCall{{ID: "toolu_1", Name: "x", Arguments: `{"a":1}`}},
	})
	p := models.NewAnthropic(models.AnthropicConfig{BaseURL: s.URL, HTTPClient: s.Client(), Model: "m", Effort: models.EffortMedium})
	resp, err := p.Stream(context.Background(), userRequest("go"), (&recorder{}).emit)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Message.Thinking != "plan" || resp.Message.ThinkingSignature != "EqQBCkYIBxgCKkA" || resp.StopReason != "tool_calls" {
		t.Errorf("response = %+v", resp)
	}
	thinking, _ := s.Requests()[0].JSON["thinking"].(map[string]any)
	if thinking["budget_tokens"] != float64(models.ThinkingBudget(models.EffortMedium)) {
		t.Errorf("thinking = %v, want the config's effort budget", thinking)
	}
}

func TestAnthropicStopReasons(t *testing.T) {
	for wire, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
		"refusal": "content_filter", "model_context_window_exceeded": "length",
	} {
		s := modelstest.NewAnthropicServer(t, modelstest.Turn{Text: []string{"x"}, StopReason: wire})
		p := models.NewAnthropic(models.AnthropicConfig{BaseURL: s.URL, HTTPClient: s.Client(), Model: "m"})
		resp, err := p.Stream(context.Background(), userRequest("go"), (&recorder{}).emit)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if resp.StopReason != want {
			t.Errorf("stop_reason %q: StopReason = %q, want %q", wire, resp.StopReason, want)
		}
	}
}

func TestAnthropicOverloadedIsRetried(t *testing.T) {
	s := modelstest.NewAnthropicServer(t, modelstest.Turn{Status: 529}, modelstest.Turn{Text: []string{"ok"}})
	p := models.NewAnthropic(models.AnthropicConfig{BaseURL: s.URL, HTTPClient: s.Client(), Model: "m", RetryBaseDelay: time.Millisecond})
	if _, err := p.Stream(context.Background(), userRequest("go"), (&recorder{}).emit); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if s.Calls() != 2 {
		t.Errorf("Calls() = %d, want 2", s.Calls())
	}
}

func TestAnthropicInvalidRequestIsNotRetried(t *testing.T) {
	s := modelstest.NewAnthropicServer(t, modelstest.Turn{Status: http.StatusBadRequest, ErrorMessage: "messages: roles must alternate"})
	p := models.NewAnthropic(models.AnthropicConfig{BaseURL: s.URL, HTTPClient: s.Client(), Model: "m", RetryBaseDelay: time.Millisecond})
	_, err := p.Stream(context.Background(), userRequest("go"), (&recorder{}).emit)
	var apiErr *models.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "messages: roles must alternate" {
		t.Fatalf("error = %v, want the 400 with its message", err)
	}
	if want := "anthropic: HTTP 400: messages: roles must alternate"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if s.Calls() != 1 {
		t.Errorf("Calls() = %d, want 1", s.Calls())
	}
}

// BenchmarkAnthropicStream32 measures one streamed call of 32 text deltas through the SDK
// against a local server answering a precomputed stream.
func BenchmarkAnthropicStream32(b *testing.B) {
	s := modelstest.NewAnthropicBenchServer(b, 32)
	p := models.NewAnthropic(models.AnthropicConfig{BaseURL: s.URL, HTTPClient: s.Client(), Model: "m"})
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
