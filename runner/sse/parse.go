package sse

import (
	"encoding/json"
	"fmt"
	"time"
)

// wireFrame is the JSON of a frame as AppendJSON writes it, for ParseFrame.
type wireFrame struct {
	Type          Type            `json:"type"`
	Timestamp     time.Time       `json:"timestamp"`
	SessionID     string          `json:"session_id"`
	Content       string          `json:"content"`
	Message       string          `json:"message"`
	SkillName     string          `json:"skill_name"`
	Text          string          `json:"text"`
	WidgetType    string          `json:"widget_type"`
	Data          json.RawMessage `json:"data"`
	ParentToolID  string          `json:"parent_tool_id"`
	CorrelationID string          `json:"correlation_id"`
	ToolName      string          `json:"tool_name"`
	ToolID        string          `json:"tool_id"`
	Parameters    json.RawMessage `json:"parameters"`
	Status        string          `json:"status"`
	Result        json.RawMessage `json:"result"`
	DurationMS    int64           `json:"duration_ms"`
	Error         string          `json:"error"`
	Reason        string          `json:"reason"`
	Turns         int             `json:"turns"`
	TraceID       string          `json:"trace_id"`
	Usage         *Usage          `json:"usage"`
}

// ParseFrame reads back the JSON of one frame (AppendJSON): its type, timestamp and the fields
// a translation into another protocol reads (the AI SDK stream of a replayed turn). Fields of
// approvals, handoffs, compaction and subagent events other than those are not read.
func ParseFrame(data []byte) (Frame, error) {
	var w wireFrame
	if err := json.Unmarshal(data, &w); err != nil {
		return Frame{}, fmt.Errorf("sse: parse frame: %w", err)
	}
	return Frame{
		Type: w.Type, Time: w.Timestamp, SessionID: w.SessionID, Content: w.Content, Message: w.Message,
		SkillName: w.SkillName, Text: w.Text, WidgetType: w.WidgetType, Data: w.Data, ParentToolID: w.ParentToolID,
		CorrelationID: w.CorrelationID, ToolName: w.ToolName, ToolID: w.ToolID, Parameters: w.Parameters,
		Status: w.Status, Result: w.Result, DurationMS: w.DurationMS, Error: w.Error,
		Reason: w.Reason, Turns: w.Turns, TraceID: w.TraceID, Usage: w.Usage,
	}, nil
}
