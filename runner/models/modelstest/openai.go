package modelstest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// NewOpenAIServer starts a fake OpenAI Chat Completions API playing script. It streams
// chat.completion.chunk events (a role chunk, the content, a finish chunk, a usage chunk when
// the request asks for stream_options.include_usage) and ends with data: [DONE]. Its URL ends
// in /v1, like the real base URL.
func NewOpenAIServer(t testing.TB, script ...Turn) *Server {
	t.Helper()
	return newServer(t, script, "/v1", writeOpenAI, openaiErrorBody)
}

// openaiChunk builds one chunk with a single choice.
func openaiChunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
	}
}

// writeOpenAI streams turn t.
func writeOpenAI(w *eventWriter, t *Turn, req map[string]any) {
	w.event("", openaiChunk(map[string]any{"role": "assistant", "content": ""}, nil))
	field := t.ReasoningField
	if field == "" {
		field = "reasoning_content"
	}
	for _, r := range t.Reasoning {
		w.event("", openaiChunk(map[string]any{field: r}, nil))
	}
	for _, text := range t.Text {
		w.event("", openaiChunk(map[string]any{"content": text}, nil))
	}
	writeOpenAICalls(w, t)
	if t.Hang {
		w.hang()
		return
	}
	if t.StreamError != "" {
		w.event("", map[string]any{"error": map[string]any{
			"message": errorMessage(t, "scripted stream error"), "type": t.StreamError, "code": nil,
		}})
		return
	}
	finish := t.StopReason
	if finish == "" {
		finish = "stop"
		if len(t.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	w.event("", openaiChunk(map[string]any{}, finish))
	if opts, _ := req["stream_options"].(map[string]any); opts["include_usage"] == true {
		u := t.Usage
		w.event("", map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": "fake",
			"choices": []any{},
			"usage": map[string]any{
				"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens,
				"total_tokens":          u.InputTokens + u.OutputTokens,
				"prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
			},
		})
	}
	w.event("", []byte("[DONE]"))
}

// writeOpenAICalls streams the tool calls: a first chunk with id and name, then the argument
// pieces, call after call or round-robin.
func writeOpenAICalls(w *eventWriter, t *Turn) {
	pieces := make([][]string, len(t.ToolCalls))
	for i, c := range t.ToolCalls {
		pieces[i] = splitArgs(c.Arguments)
	}
	header := func(i int) {
		c := t.ToolCalls[i]
		w.event("", openaiChunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		}}}, nil))
	}
	piece := func(i, j int) {
		w.event("", openaiChunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "function": map[string]any{"arguments": pieces[i][j]},
		}}}, nil))
	}
	if !t.Interleave {
		for i := range t.ToolCalls {
			header(i)
			for j := range pieces[i] {
				piece(i, j)
			}
		}
		return
	}
	for i := range t.ToolCalls {
		header(i)
	}
	for j := 0; ; j++ {
		wrote := false
		for i := range t.ToolCalls {
			if j < len(pieces[i]) {
				piece(i, j)
				wrote = true
			}
		}
		if !wrote {
			return
		}
	}
}

// openaiErrorBody is the error body of an HTTP error turn.
func openaiErrorBody(t *Turn) []byte {
	typ := "server_error"
	switch {
	case t.Status == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case t.Status == http.StatusUnauthorized:
		typ = "invalid_request_error"
	case t.Status < 500:
		typ = "invalid_request_error"
	}
	b, err := json.Marshal(map[string]any{"error": map[string]any{
		"message": errorMessage(t, http.StatusText(t.Status)), "type": typ, "param": nil, "code": nil,
	}})
	if err != nil {
		panic("modelstest: marshal error body: " + err.Error())
	}
	return b
}

// errorMessage is the scripted message or a default.
func errorMessage(t *Turn, def string) string {
	if t.ErrorMessage != "" {
		return t.ErrorMessage
	}
	return def
}

// NewOpenAIBenchServer starts a fake OpenAI API for benchmarks: every request gets the same
// precomputed stream (a role chunk, chunks text chunks "tok ", a finish chunk, a usage chunk,
// [DONE]) written at once, with no delay and no request recording (Requests stays empty).
func NewOpenAIBenchServer(t testing.TB, chunks int) *Server {
	t.Helper()
	var b strings.Builder
	line := func(v any) {
		data, err := json.Marshal(v)
		if err != nil {
			panic("modelstest: marshal chunk: " + err.Error())
		}
		b.WriteString("data: ")
		b.Write(data)
		b.WriteString("\n\n")
	}
	line(openaiChunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for range chunks {
		line(openaiChunk(map[string]any{"content": "tok "}, nil))
	}
	line(openaiChunk(map[string]any{}, "stop"))
	line(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": "fake",
		"choices": []any{},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": 10 + chunks},
	})
	b.WriteString("data: [DONE]\n\n")
	return newBenchServer(t, "/v1", []byte(b.String()))
}
