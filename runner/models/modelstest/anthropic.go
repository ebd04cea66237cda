package modelstest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// NewAnthropicServer starts a fake Anthropic Messages API playing script. It streams
// message_start (with input and cache usage), ping, one content block per reasoning (thinking
// with its signature), text and tool call (input_json_delta pieces), message_delta (stop reason
// and output usage) and message_stop. Its URL is the server root; the SDK adds /v1/messages.
func NewAnthropicServer(t testing.TB, script ...Turn) *Server {
	t.Helper()
	return newServer(t, script, "", writeAnthropic, anthropicErrorBody)
}

// writeAnthropic streams turn t.
func writeAnthropic(w *eventWriter, t *Turn, _ map[string]any) {
	u := t.Usage
	w.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": u.InputTokens - u.CachedTokens, "output_tokens": 1,
			"cache_read_input_tokens": u.CachedTokens, "cache_creation_input_tokens": 0,
		},
	}})
	w.event("ping", map[string]any{"type": "ping"})
	index := 0
	block := func(start map[string]any, deltas []map[string]any) {
		w.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": start})
		for _, d := range deltas {
			w.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
		}
		w.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if len(t.Reasoning) > 0 {
		deltas := make([]map[string]any, 0, len(t.Reasoning)+1)
		for _, r := range t.Reasoning {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": r})
		}
		sig := t.Signature
		if sig == "" {
			sig = "sig"
		}
		deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": sig})
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, deltas)
	}
	if len(t.Text) > 0 {
		deltas := make([]map[string]any, 0, len(t.Text))
		for _, text := range t.Text {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": text})
		}
		block(map[string]any{"type": "text", "text": ""}, deltas)
	}
	for _, c := range t.ToolCalls {
		pieces := splitArgs(c.Arguments)
		deltas := make([]map[string]any, 0, len(pieces))
		for _, p := range pieces {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": p})
		}
		block(map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}, deltas)
	}
	if t.Hang {
		w.hang()
		return
	}
	if t.StreamError != "" {
		w.event("error", map[string]any{"type": "error", "error": map[string]any{
			"type": t.StreamError, "message": errorMessage(t, "scripted stream error"),
		}})
		return
	}
	stop := t.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(t.ToolCalls) > 0 {
			stop = "tool_use"
		}
	}
	w.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.OutputTokens},
	})
	w.event("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicErrorBody is the error body of an HTTP error turn.
func anthropicErrorBody(t *Turn) []byte {
	typ := "api_error"
	switch {
	case t.Status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case t.Status == http.StatusUnauthorized:
		typ = "authentication_error"
	case t.Status == 529:
		typ = "overloaded_error"
	case t.Status < 500:
		typ = "invalid_request_error"
	}
	b, err := json.Marshal(map[string]any{"type": "error", "error": map[string]any{
		"type": typ, "message": errorMessage(t, http.StatusText(t.Status)),
	}})
	if err != nil {
		panic("modelstest: marshal error body: " + err.Error())
	}
	return b
}

// NewAnthropicBenchServer starts a fake Anthropic API for benchmarks: every request gets the
// same precomputed stream of one text block of chunks deltas "tok ", written at once, with no
// delay and no request recording (Requests stays empty).
func NewAnthropicBenchServer(t testing.TB, chunks int) *Server {
	t.Helper()
	var b strings.Builder
	event := func(name string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			panic("modelstest: marshal event: " + err.Error())
		}
		b.WriteString("event: " + name + "\ndata: ")
		b.Write(data)
		b.WriteString("\n\n")
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1},
	}})
	event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for range chunks {
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "tok "}})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": chunks}})
	event("message_stop", map[string]any{"type": "message_stop"})
	return newBenchServer(t, "", []byte(b.String()))
}
