package runtime_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
)

// allowed lists the keys each UI message stream chunk may carry: the AI SDK validates chunks
// with strict schemas (ui-message-chunks.ts), so any other key breaks useChat.
var allowed = map[string][]string{
	"start":                 {"type", "messageId", "messageMetadata"},
	"start-step":            {"type"},
	"finish-step":           {"type"},
	"finish":                {"type", "messageMetadata"},
	"text-start":            {"type", "id"},
	"text-delta":            {"type", "id", "delta"},
	"text-end":              {"type", "id"},
	"reasoning-start":       {"type", "id"},
	"reasoning-delta":       {"type", "id", "delta"},
	"reasoning-end":         {"type", "id"},
	"tool-input-start":      {"type", "toolCallId", "toolName"},
	"tool-input-available":  {"type", "toolCallId", "toolName", "input", "providerMetadata"},
	"tool-output-available": {"type", "toolCallId", "output"},
	"tool-output-error":     {"type", "toolCallId", "errorText"},
	"error":                 {"type", "errorText"},
}

func checkChunks(t *testing.T, fs []frame) {
	t.Helper()
	if len(fs) == 0 || fs[len(fs)-1].Raw != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", types(fs))
	}
	for _, f := range fs[:len(fs)-1] {
		typ := f.typ()
		keys := allowed[typ]
		if strings.HasPrefix(typ, "data-") {
			keys = []string{"type", "id", "data", "transient"}
		}
		if keys == nil {
			t.Errorf("unknown chunk type %q", typ)
			continue
		}
		for k := range f.Data {
			if !slices.Contains(keys, k) {
				t.Errorf("chunk %s has key %q, which the AI SDK refuses", f.Raw, k)
			}
		}
	}
}

func TestAIStreamTurn(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk")})
	r := e.do("POST", "/chat/ai-stream", "", map[string]any{"message": `/tool load_knowledge {"name":"plans"}`})
	if r.Status != 200 || r.Header.Get("x-vercel-ai-ui-message-stream") != "v1" || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d headers %v", r.Status, r.Header)
	}
	fs := r.Frames
	checkChunks(t, fs)
	got := types(fs)
	// Collapse the text deltas.
	var collapsed []string
	for _, g := range got {
		if g == "text-delta" && len(collapsed) > 0 && collapsed[len(collapsed)-1] == "text-delta" {
			continue
		}
		collapsed = append(collapsed, g)
	}
	want := []string{"start", "start-step", "tool-input-start", "tool-input-available", "tool-output-available",
		"finish-step", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish", "[DONE]"}
	if d := cmp.Diff(want, collapsed); d != "" {
		t.Fatalf("chunks (-want +got):\n%s", d)
	}
	start := fs[0].Data
	sid := str(start["messageMetadata"].(map[string]any)["session_id"])
	if !strings.HasPrefix(str(start["messageId"]), "msg_") || sid == "" {
		t.Errorf("start = %v", start)
	}
	in := ofType(fs, "tool-input-available")[0].Data
	out := ofType(fs, "tool-output-available")[0].Data
	if in["toolName"] != "load_knowledge" || !cmp.Equal(in["input"], map[string]any{"name": "plans"}) || out["toolCallId"] != in["toolCallId"] ||
		!strings.Contains(str(out["output"]), "| starter |") {
		t.Errorf("tool chunks: %v %v", in, out)
	}
	var txt string
	for _, f := range ofType(fs, "text-delta") {
		txt += str(f.Data["delta"])
		if f.Data["id"] != ofType(fs, "text-start")[0].Data["id"] {
			t.Errorf("delta of another part: %v", f.Data)
		}
	}
	if !strings.HasPrefix(txt, "echo: ") {
		t.Errorf("text = %q", txt)
	}
	meta := ofType(fs, "finish")[0].Data["messageMetadata"].(map[string]any)
	if meta["session_id"] != sid || meta["reason"] != "model_stop" || num(meta["turns"]) != 2 || meta["usage"] == nil {
		t.Errorf("finish metadata = %v", meta)
	}
}

func TestAIStreamUseChatBody(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	body := map[string]any{
		"id":      "chat-abc",
		"trigger": "submit-message",
		"messages": []any{
			map[string]any{"id": "m1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "hello"}, map[string]any{"type": "text", "text": "world"}}},
		},
	}
	fs := e.do("POST", "/chat/ai-stream", "", body).Frames
	checkChunks(t, fs)
	var txt string
	for _, f := range ofType(fs, "text-delta") {
		txt += str(f.Data["delta"])
	}
	if txt != "echo: hello\nworld" {
		t.Errorf("text = %q", txt)
	}
	if sid := ofType(fs, "start")[0].Data["messageMetadata"].(map[string]any)["session_id"]; sid != "chat-abc" {
		t.Errorf("session = %v, want the chat id", sid)
	}
	// useChat sends the whole conversation again; the runtime answers the last user message
	// and keeps the session.
	body["messages"] = append(body["messages"].([]any),
		map[string]any{"id": "m2", "role": "assistant", "parts": []any{map[string]any{"type": "text", "text": "echo: hello\nworld"}}},
		map[string]any{"id": "m3", "role": "user", "parts": []any{
			map[string]any{"type": "text", "text": "again"},
			map[string]any{"type": "file", "mediaType": "image/png", "url": "data:image/png;base64," + png, "filename": "a.png"},
		}})
	fs = e.do("POST", "/chat/ai-stream", "", body).Frames
	checkChunks(t, fs)
	h := e.do("GET", "/sessions/history/chat-abc", "", nil)
	msgs := h.JSON["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("history = %s", h.Body)
	}
	if att := msgs[2].(map[string]any)["attachments"].([]any); len(att) != 1 || att[0].(map[string]any)["mimeType"] != "image/png" {
		t.Errorf("file part not kept: %v", msgs[2])
	}
	// Errors before the stream are JSON.
	if r := e.do("POST", "/chat/ai-stream", "", map[string]any{"messages": []any{}}); r.Status != 400 || r.JSON["field"] != "message" {
		t.Errorf("empty useChat body: %d %s", r.Status, r.Body)
	}
}

func TestAIStreamReasoningAndError(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t,
		modelstest.Turn{Reasoning: []string{"hm"}, Text: []string{"yes"}},
		modelstest.Turn{Status: http.StatusBadRequest, ErrorMessage: "broken"})
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	fs := e.do("POST", "/chat/ai-stream", "", map[string]any{"message": "q"}).Frames
	checkChunks(t, fs)
	want := []string{"start", "start-step", "reasoning-start", "reasoning-delta", "reasoning-end", "text-start", "text-delta", "text-end", "finish-step", "finish", "[DONE]"}
	if d := cmp.Diff(want, types(fs)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
	fs = e.do("POST", "/chat/ai-stream", "", map[string]any{"message": "q"}).Frames
	checkChunks(t, fs)
	errs := ofType(fs, "error")
	if len(errs) != 1 || !strings.Contains(str(errs[0].Data["errorText"]), "broken") {
		t.Errorf("error chunks = %v", types(fs))
	}
	if meta := ofType(fs, "finish")[0].Data["messageMetadata"].(map[string]any); meta["reason"] != "error" {
		t.Errorf("finish = %v", meta)
	}
}
