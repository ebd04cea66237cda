package models

import (
	"context"
	"encoding/json"
	"fmt"
)

// ScriptedCallID is the id of the call a Scripted provider makes.
const ScriptedCallID = "call_scripted"

// Scripted is a provider that calls one given tool and then ends the turn, for the platform's
// own calls of a tool: an automation's tool action (CONTRACT §9) runs through a turn, so that
// the call gets its approvals, durable runs, frames and history like a model's, and no model is
// called. Its first answer is the call; the answer after the call's result is empty. Usage is
// zero. It is safe for concurrent use.
type Scripted struct {
	Tool      string
	Arguments json.RawMessage // a JSON object; nil means {}
}

var _ Provider = Scripted{}

// Stream implements Provider.
func (s Scripted) Stream(ctx context.Context, req Request, emit func(Event) error) (Response, error) {
	if ctx.Err() != nil {
		return Response{}, fmt.Errorf("models: scripted: %w", context.Cause(ctx))
	}
	resp := Response{Message: Message{Role: RoleAssistant}, StopReason: "stop"}
	// After the last user message, a tool result means the call was made: the turn ends.
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != RoleUser; i-- {
		if req.Messages[i].Role == RoleTool {
			return resp, nil
		}
	}
	args := s.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	resp.Message.ToolCalls = []ToolCall{{ID: ScriptedCallID, Name: s.Tool, Arguments: args}}
	resp.StopReason = "tool_calls"
	return resp, emit(Event{Type: EventToolCall, ToolCall: &resp.Message.ToolCalls[0]})
}
