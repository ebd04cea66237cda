package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Echo is the deterministic offline provider, for trying an agent and for tests and benchmarks:
//
//   - it answers "echo: <last user message>", streamed as a few text deltas cut at word
//     boundaries (their concatenation is exactly the answer);
//   - a last user message "/tool NAME {json}" makes it request that tool call, with id
//     "call_<n>" (n counts the tool calls of the conversation) and the JSON object as
//     arguments ({} when absent);
//   - when the last message is a tool result it answers "echo: <tool result content>".
//
// Usage counts words as tokens: every word sent (system prompt and messages) as input, the
// words of the answer as output. Echo ignores Model, Tools, MaxTokens and Effort. Its zero
// value is ready and it is safe for concurrent use.
type Echo struct{}

var _ Provider = Echo{}

// EchoPrefix starts every text answer of Echo.
const EchoPrefix = "echo: "

// maxEchoDeltas bounds the number of text deltas of one echo answer.
const maxEchoDeltas = 8

// Stream implements Provider.
func (Echo) Stream(ctx context.Context, req Request, emit func(Event) error) (Response, error) {
	if ctx.Err() != nil {
		return Response{}, fmt.Errorf("models: echo: %w", context.Cause(ctx))
	}
	input := countWords(req.System)
	calls := 0
	for i := range req.Messages {
		m := &req.Messages[i]
		input += countWords(m.Content)
		calls += len(m.ToolCalls)
		for _, tc := range m.ToolCalls {
			input += countWords(tc.Arguments)
		}
	}
	resp := Response{Message: Message{Role: RoleAssistant}, StopReason: "stop"}
	resp.Usage.InputTokens = input

	var answer string
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == RoleTool {
		answer = EchoPrefix + req.Messages[n-1].Content
	} else {
		var last string
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if req.Messages[i].Role == RoleUser {
				last = req.Messages[i].Content
				break
			}
		}
		call, err := parseToolCommand(last, calls+1)
		if err != nil {
			answer = EchoPrefix + err.Error()
		} else if call.Name != "" {
			resp.Message.ToolCalls = []ToolCall{call}
			resp.StopReason = "tool_calls"
			resp.Usage.OutputTokens = 1 + countWords(call.Arguments)
			if err := emit(Event{Type: EventToolCall, ToolCall: &resp.Message.ToolCalls[0]}); err != nil {
				return resp, err
			}
			return resp, nil
		} else {
			answer = EchoPrefix + last
		}
	}
	resp.Message.Content = answer
	resp.Usage.OutputTokens = countWords(answer)
	return resp, emitWords(answer, resp.Usage.OutputTokens, emit)
}

// parseToolCommand reads "/tool NAME {json}". It returns a zero ToolCall when s is not a tool
// command, and an error when it is one with a bad name or arguments.
func parseToolCommand(s string, n int) (ToolCall, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), "/tool")
	if !ok || (rest != "" && !isSpace(rest[0])) {
		return ToolCall{}, nil
	}
	rest = strings.TrimSpace(rest)
	end := strings.IndexFunc(rest, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
	if end < 0 {
		end = len(rest)
	}
	name, args := rest[:end], strings.TrimSpace(rest[end:])
	if name == "" {
		return ToolCall{}, errors.New("/tool needs a tool name: /tool NAME {json}")
	}
	raw := json.RawMessage("{}")
	if args != "" {
		if !isJSONObject(json.RawMessage(args)) {
			return ToolCall{}, fmt.Errorf("/tool %s: arguments are not a JSON object: %s", name, args)
		}
		raw = json.RawMessage(args)
	}
	return ToolCall{ID: "call_" + strconv.Itoa(n), Name: name, Arguments: raw}, nil
}

// emitWords streams s as at most maxEchoDeltas deltas cut at word boundaries, the spaces before
// a word going with it (like model tokens: "echo:", " hello", " world"), without copying s.
func emitWords(s string, words int, emit func(Event) error) error {
	per := max(1, (words+maxEchoDeltas-1)/maxEchoDeltas) // words per delta
	start, seen := 0, 0
	for i := 1; i < len(s); i++ {
		if isSpace(s[i-1]) || !isSpace(s[i]) {
			continue
		}
		// s[i] starts a run of spaces; it is a boundary when a word follows the run
		j := i + 1
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		if j == len(s) {
			break // trailing spaces stay with the last word
		}
		seen++
		if seen%per == 0 {
			if err := emit(Event{Type: EventTextDelta, Text: s[start:i]}); err != nil {
				return err
			}
			start = i
		}
		i = j
	}
	if start < len(s) {
		return emit(Event{Type: EventTextDelta, Text: s[start:]})
	}
	return nil
}

// countWords counts runs of non-space bytes.
func countWords[T ~string | ~[]byte](s T) int {
	n := 0
	inWord := false
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			inWord = false
		} else if !inWord {
			inWord = true
			n++
		}
	}
	return n
}

// isSpace reports ASCII white space.
func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}
