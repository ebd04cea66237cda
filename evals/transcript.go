package evals

import (
	"encoding/json"
	"strings"

	"svc/runner/sse"
)

// Transcript is what one fresh session's turn did, as its chat stream reported it.
type Transcript struct {
	SessionID string
	// Frames are the frames of the stream in order (text_delta, tool_call_start,
	// tool_call_result, skill_activated, done, ...). Frames of other types are ignored.
	Frames []sse.Frame
}

// ToolCall is one tool call of a transcript: its start and, when it came, its result.
type ToolCall struct {
	ID         string
	Name       string
	Parameters json.RawMessage
	Status     string // success | error, or "" when no result came
	Result     json.RawMessage
	Content    string // the text given to the model, when the result frame had it
	Error      string
}

// turn is a Transcript decoded for the rules and the judge.
type turn struct {
	Text       string
	ToolCalls  []*ToolCall
	Skills     []string // skill_activated, in order
	DoneReason string   // "" when no done frame came
	Tokens     int      // the done frame's total tokens
	Errors     []string // error frames' messages
}

// decode folds frames into a turn. A tool_call_result is matched to its start by tool id.
func decode(frames []sse.Frame) turn {
	var t turn
	var text strings.Builder
	byID := map[string]*ToolCall{}
	for i := range frames {
		f := &frames[i]
		switch f.Type {
		case sse.TypeTextDelta:
			text.WriteString(f.Content)
		case sse.TypeToolCallStart:
			if f.ParentToolID != "" {
				continue // a handler's call (a nested card): the checks are about the model's calls
			}
			c := &ToolCall{ID: f.ToolID, Name: f.ToolName, Parameters: f.Parameters}
			t.ToolCalls = append(t.ToolCalls, c)
			if f.ToolID != "" {
				byID[f.ToolID] = c
			}
		case sse.TypeToolCallResult:
			if f.ParentToolID != "" {
				continue
			}
			c, ok := byID[f.ToolID]
			if !ok { // a result without its start: keep it, nameless
				c = &ToolCall{ID: f.ToolID, Parameters: f.Parameters}
				t.ToolCalls = append(t.ToolCalls, c)
			}
			c.Status, c.Result, c.Content, c.Error = f.Status, f.Result, f.Content, f.Error
		case sse.TypeSkillActivated:
			t.Skills = append(t.Skills, f.SkillName)
		case sse.TypeError:
			t.Errors = append(t.Errors, f.Message)
		case sse.TypeDone:
			t.DoneReason = f.Reason
			if u := f.Usage; u != nil {
				t.Tokens = u.TotalTokens
				if t.Tokens == 0 {
					t.Tokens = u.InputTokens + u.OutputTokens
				}
			}
		}
	}
	t.Text = text.String()
	return t
}

// stringArg returns the string argument key of a call's parameters, or "".
func stringArg(params json.RawMessage, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}
