package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/models"
)

func TestEchoText(t *testing.T) {
	for _, msg := range []string{
		"hello",
		"hello world",
		"  spaced   out\ttext\nwith lines  ",
		strings.Repeat("many words ", 40),
		"",
		"/toolish is not a command",
	} {
		var rec recorder
		resp, err := models.Echo{}.Stream(context.Background(), userRequest(msg), rec.emit)
		if err != nil {
			t.Fatalf("Stream(%q): %v", msg, err)
		}
		want := "echo: " + msg
		if got := rec.text(models.EventTextDelta); got != want {
			t.Errorf("Stream(%q) deltas join to %q, want %q", msg, got, want)
		}
		if resp.Message.Content != want || resp.StopReason != "stop" || resp.Message.Role != models.RoleAssistant {
			t.Errorf("Stream(%q) = %+v", msg, resp)
		}
		if n := len(rec.events); n < 1 || n > 8 {
			t.Errorf("Stream(%q) sent %d deltas, want 1 to 8", msg, n)
		}
		for _, ev := range rec.events[1:] {
			if c := ev.Text[0]; c != ' ' && c != '\t' && c != '\n' {
				t.Errorf("Stream(%q): delta %q does not start at a word boundary", msg, ev.Text)
			}
		}
	}
}

func TestEchoSplitsIntoWords(t *testing.T) {
	var rec recorder
	if _, err := (models.Echo{}).Stream(context.Background(), userRequest("a b  c"), rec.emit); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range rec.events {
		got = append(got, ev.Text)
	}
	if diff := cmp.Diff([]string{"echo:", " a", " b", "  c"}, got); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
}

func TestEchoToolCall(t *testing.T) {
	req := models.Request{Messages: []models.Message{
		{Role: models.RoleUser, Content: "/tool first {}"},
		{Role: models.RoleAssistant, ToolCalls: []models.ToolCall{{ID: "call_1", Name: "first", Arguments: json.RawMessage(`{}`)}}},
		{Role: models.RoleTool, ToolCallID: "call_1", Content: "done"},
		{Role: models.RoleAssistant, Content: "echo: done"},
		{Role: models.RoleUser, Content: `/tool search {"q": "go  modules", "n": 2}`},
	}}
	var rec recorder
	resp, err := models.Echo{}.Stream(context.Background(), req, rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	want := models.ToolCall{ID: "call_2", Name: "search", Arguments: json.RawMessage(`{"q": "go  modules", "n": 2}`)}
	if diff := cmp.Diff([]models.ToolCall{want}, rec.calls()); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]models.ToolCall{want}, resp.Message.ToolCalls); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if resp.StopReason != "tool_calls" || resp.Message.Content != "" || len(rec.events) != 1 {
		t.Errorf("response = %+v, %d events", resp, len(rec.events))
	}

	resp, err = models.Echo{}.Stream(context.Background(), userRequest("/tool ping"), (&recorder{}).emit)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || string(resp.Message.ToolCalls[0].Arguments) != "{}" || resp.Message.ToolCalls[0].ID != "call_1" {
		t.Errorf("/tool ping = %+v, want call_1 ping {}", resp.Message.ToolCalls)
	}
}

func TestEchoBadToolCommand(t *testing.T) {
	for msg, want := range map[string]string{
		"/tool":               "echo: /tool needs a tool name: /tool NAME {json}",
		"/tool x [1,2]":       "echo: /tool x: arguments are not a JSON object: [1,2]",
		`/tool x {"a":`:       `echo: /tool x: arguments are not a JSON object: {"a":`,
		"/tool x not json at": "echo: /tool x: arguments are not a JSON object: not json at",
	} {
		resp, err := models.Echo{}.Stream(context.Background(), userRequest(msg), (&recorder{}).emit)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Content != want || len(resp.Message.ToolCalls) != 0 {
			t.Errorf("Stream(%q) = %q, %v; want %q and no call", msg, resp.Message.Content, resp.Message.ToolCalls, want)
		}
	}
}

func TestEchoToolResult(t *testing.T) {
	req := models.Request{Messages: []models.Message{
		{Role: models.RoleUser, Content: "/tool add {\"a\":1}"},
		{Role: models.RoleAssistant, ToolCalls: []models.ToolCall{{ID: "call_1", Name: "add", Arguments: json.RawMessage(`{"a":1}`)}}},
		{Role: models.RoleTool, ToolCallID: "call_1", ToolName: "add", Content: `{"sum": 1}`},
	}}
	var rec recorder
	resp, err := models.Echo{}.Stream(context.Background(), req, rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	if want := `echo: {"sum": 1}`; resp.Message.Content != want || rec.text(models.EventTextDelta) != want {
		t.Errorf("answer = %q, want %q", resp.Message.Content, want)
	}
}

func TestEchoUsageIsDeterministic(t *testing.T) {
	req := models.Request{System: "two words", Messages: []models.Message{
		{Role: models.RoleUser, Content: "one two three"},
		{Role: models.RoleAssistant, Content: "four"},
		{Role: models.RoleUser, Content: "hi there"},
	}}
	want := models.Usage{InputTokens: 2 + 3 + 1 + 2, OutputTokens: 3} // "echo: hi there"
	for range 3 {
		resp, err := models.Echo{}.Stream(context.Background(), req, (&recorder{}).emit)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage != want {
			t.Fatalf("Usage = %+v, want %+v", resp.Usage, want)
		}
	}
}

func TestEchoErrors(t *testing.T) {
	errStop := errors.New("stop")
	rec := recorder{onEvent: func(models.Event) error { return errStop }}
	if _, err := (models.Echo{}).Stream(context.Background(), userRequest("a b c"), rec.emit); err != errStop { //nolint:errorlint // returned as is
		t.Errorf("emit error: got %v, want it as is", err)
	}
	if len(rec.events) != 1 {
		t.Errorf("%d events after the emit error, want 1", len(rec.events))
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errStop)
	if _, err := (models.Echo{}).Stream(ctx, userRequest("a"), (&recorder{}).emit); !errors.Is(err, errStop) {
		t.Errorf("cancelled: got %v, want the cause", err)
	}
}

func BenchmarkEcho(b *testing.B) {
	req := userRequest("the quick brown fox jumps over the lazy dog")
	emit := func(models.Event) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (models.Echo{}).Stream(ctx, req, emit); err != nil {
			b.Fatal(err)
		}
	}
}
