package sse

import (
	"encoding/json"
	"time"
)

// Type is the kind of a frame, the "type" field on the wire.
type Type string

// Frame types of spec §6.1 that the runtime emits, and the event bus's session_updated.
const (
	TypeInit            Type = "init"
	TypeTextDelta       Type = "text_delta"
	TypeThinkingDelta   Type = "thinking_delta"
	TypeToolCallStart   Type = "tool_call_start"
	TypeToolLabelUpdate Type = "tool_label_update"
	TypeToolCallResult  Type = "tool_call_result"
	TypeToolLog         Type = "tool_log"
	TypeSkillActivated  Type = "skill_activated"
	TypeCompactionStart Type = "compaction_start"
	TypeCompactionEnd   Type = "compaction_end"
	TypeWarning         Type = "warning"
	TypeError           Type = "error"
	TypeDone            Type = "done"
	TypeSessionUpdated  Type = "session_updated"
	TypeInputRedacted   Type = "input_redacted"
	TypeAskChoice       Type = "ask_choice"
	TypeAgentHandoff    Type = "agent_handoff"
	TypeWidget          Type = "widget"

	TypeSubagentEvent        Type = "subagent_event"
	TypeConfirmationRequired Type = "confirmation_required"
	TypeApproved             Type = "approved"
	TypeDenied               Type = "denied"
	TypeDurableApproval      Type = "durable_approval_required"
)

// Tool call result statuses.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// Usage is the token usage of a done frame.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// Frame is one event of a chat stream. Only the fields of its Type are written (see AppendJSON);
// the others are ignored. Time is the frame's timestamp; the zero value means "when written".
type Frame struct {
	Type Type
	Time time.Time

	SessionID string // init, session_updated
	Content   string // text_delta, thinking_delta; tool_call_result (the text given to the model)
	Message   string // warning, error, tool_log
	SkillName string // skill_activated
	Text      string // input_redacted: the user's message after redaction

	AskID    string          // ask_choice
	Question string          // ask_choice
	Options  json.RawMessage // ask_choice: [{value, label}]
	Multi    bool            // ask_choice: several options may be chosen
	// AllowEdits: durable_approval_required, whose session_id, tool_name, question and options
	// use the fields above.
	AllowEdits bool

	From         string   // agent_handoff: the session's agent before ("" for the unscoped chat)
	To           string   // agent_handoff
	RemovedTools []string // agent_handoff: tools the session had and the new agent has not

	WidgetType string          // widget
	Data       json.RawMessage // widget

	// ParentToolID is, on subagent_event, the tool call whose handler runs the subagent; on
	// tool_call_start and tool_call_result, the tool call whose handler made this call through
	// ctx.callTool (a nested card); "" for a call of the model.
	ParentToolID string
	AgentName    string          // subagent_event
	EventType    string          // subagent_event: text | tool_call | tool_result | error
	ToolArgs     json.RawMessage // subagent_event, for tool_call

	CorrelationID  string // confirmation_required
	Endpoint       string // confirmation_required
	Method         string // confirmation_required
	ApprovalReason string // confirmation_required: why the call needs approval
	Escalated      bool   // confirmation_required
	ConnectionName string // confirmation_required, for a connection call
	ResourceType   string // approved, denied: "tool_call"
	PreviewID      string // approved, denied: the correlation_id answered
	TimedOut       bool   // denied: no answer came in time

	ToolName       string          // tool_call_start, tool_log, session_updated
	ToolID         string          // tool_call_start, tool_label_update, tool_call_result
	Parameters     json.RawMessage // tool_call_start; tool_call_result when set
	RunningLabel   string          // tool_call_start, tool_label_update
	CompletedLabel string          // tool_call_start, tool_label_update
	Status         string          // tool_call_result (success | error), session_updated
	Result         json.RawMessage // tool_call_result: structured result, when the tool has one
	DurationMS     int64           // tool_call_result
	Error          string          // tool_call_result when Status is error

	Reason  string // done
	Turns   int    // done
	TraceID string // done, when traces are exported
	Usage   *Usage // done

	EstimatedTokens  int // compaction_start
	Threshold        int // compaction_start
	TokensBefore     int // compaction_end
	TokensAfter      int // compaction_end
	CompactionTokens int // compaction_end
}

// AppendJSON appends the JSON object of f to dst: "type", "timestamp" (ISO 8601, UTC,
// milliseconds) and the fields of f's type. Optional fields are left out when empty.
// now is used when f.Time is zero.
func AppendJSON(dst []byte, f *Frame, now time.Time) []byte {
	ts := f.Time
	if ts.IsZero() {
		ts = now
	}
	var scratch [32]byte
	return appendFrame(dst, f, AppendTimestamp(scratch[:0], ts))
}

// appendFrame is AppendJSON with the timestamp already encoded.
func appendFrame(dst []byte, f *Frame, stamp []byte) []byte {
	dst = append(dst, `{"type":`...)
	dst = AppendString(dst, string(f.Type))
	dst = append(dst, `,"timestamp":"`...)
	dst = append(dst, stamp...)
	dst = append(dst, '"')
	switch f.Type {
	case TypeInit:
		dst = field(dst, "session_id", f.SessionID)
	case TypeTextDelta, TypeThinkingDelta:
		dst = field(dst, "content", f.Content)
	case TypeToolCallStart:
		dst = field(dst, "tool_name", f.ToolName)
		dst = field(dst, "tool_id", f.ToolID)
		dst = rawField(dst, "parameters", f.Parameters, "{}")
		dst = optField(dst, "running_label", f.RunningLabel)
		dst = optField(dst, "completed_label", f.CompletedLabel)
		dst = optField(dst, "parent_tool_id", f.ParentToolID)
	case TypeToolLabelUpdate:
		dst = field(dst, "tool_id", f.ToolID)
		dst = optField(dst, "running_label", f.RunningLabel)
		dst = optField(dst, "completed_label", f.CompletedLabel)
	case TypeToolCallResult:
		dst = field(dst, "tool_id", f.ToolID)
		dst = field(dst, "status", f.Status)
		if len(f.Result) > 0 {
			dst = rawField(dst, "result", f.Result, "null")
		}
		dst = optField(dst, "content", f.Content)
		if len(f.Parameters) > 0 {
			dst = rawField(dst, "parameters", f.Parameters, "{}")
		}
		dst = intField(dst, "duration_ms", f.DurationMS)
		dst = optField(dst, "error", f.Error)
		dst = optField(dst, "parent_tool_id", f.ParentToolID)
	case TypeToolLog:
		dst = field(dst, "tool_name", f.ToolName)
		dst = field(dst, "message", f.Message)
	case TypeSkillActivated:
		dst = field(dst, "skill_name", f.SkillName)
	case TypeInputRedacted:
		dst = field(dst, "text", f.Text)
	case TypeAskChoice:
		dst = field(dst, "ask_id", f.AskID)
		dst = field(dst, "question", f.Question)
		dst = rawField(dst, "options", f.Options, "[]")
		if f.Multi {
			dst = append(dst, `,"multi":true`...)
		}
	case TypeAgentHandoff:
		dst = field(dst, "from", f.From)
		dst = field(dst, "to", f.To)
		dst = append(dst, `,"removed_tools":[`...)
		for i, name := range f.RemovedTools {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, name)
		}
		dst = append(dst, ']')
	case TypeWidget:
		dst = field(dst, "widget_type", f.WidgetType)
		dst = rawField(dst, "data", f.Data, "null")
	case TypeSubagentEvent:
		dst = field(dst, "parent_tool_id", f.ParentToolID)
		dst = field(dst, "agent_name", f.AgentName)
		dst = field(dst, "event_type", f.EventType)
		dst = optField(dst, "tool_name", f.ToolName)
		if len(f.ToolArgs) > 0 {
			dst = rawField(dst, "tool_args", f.ToolArgs, "{}")
		}
		if len(f.Result) > 0 {
			dst = rawField(dst, "result", f.Result, "null")
		}
		dst = optField(dst, "text", f.Text)
		dst = optField(dst, "error", f.Error)
	case TypeConfirmationRequired:
		dst = field(dst, "correlation_id", f.CorrelationID)
		dst = field(dst, "tool_name", f.ToolName)
		dst = field(dst, "tool_id", f.ToolID)
		dst = field(dst, "endpoint", f.Endpoint)
		dst = field(dst, "method", f.Method)
		dst = field(dst, "reason", f.ApprovalReason)
		dst = boolField(dst, "escalated", f.Escalated)
		if len(f.Parameters) > 0 {
			dst = rawField(dst, "params", f.Parameters, "{}")
		}
		dst = optField(dst, "connection_name", f.ConnectionName)
	case TypeApproved, TypeDenied:
		dst = field(dst, "resource_type", f.ResourceType)
		dst = field(dst, "preview_id", f.PreviewID)
		dst = optField(dst, "tool_id", f.ToolID)
		if f.TimedOut {
			dst = append(dst, `,"timeout":true`...)
		}
	case TypeCompactionStart:
		dst = intField(dst, "estimated_tokens", int64(f.EstimatedTokens))
		dst = intField(dst, "threshold", int64(f.Threshold))
	case TypeCompactionEnd:
		dst = intField(dst, "tokens_before", int64(f.TokensBefore))
		dst = intField(dst, "tokens_after", int64(f.TokensAfter))
		dst = intField(dst, "compaction_tokens", int64(f.CompactionTokens))
	case TypeWarning, TypeError:
		dst = field(dst, "message", f.Message)
	case TypeDone:
		dst = optField(dst, "reason", f.Reason)
		dst = intField(dst, "turns", int64(f.Turns))
		dst = optField(dst, "trace_id", f.TraceID)
		if u := f.Usage; u != nil {
			dst = append(dst, `,"usage":{"input_tokens":`...)
			dst = appendInt(dst, int64(u.InputTokens))
			dst = append(dst, `,"output_tokens":`...)
			dst = appendInt(dst, int64(u.OutputTokens))
			dst = append(dst, `,"cached_tokens":`...)
			dst = appendInt(dst, int64(u.CachedTokens))
			dst = append(dst, `,"total_tokens":`...)
			dst = appendInt(dst, int64(u.TotalTokens))
			dst = append(dst, '}')
		}
	case TypeDurableApproval:
		dst = field(dst, "session_id", f.SessionID)
		dst = field(dst, "tool_name", f.ToolName)
		dst = optField(dst, "question", f.Question)
		if len(f.Options) > 0 {
			dst = rawField(dst, "options", f.Options, "[]")
		}
		if f.AllowEdits {
			dst = append(dst, `,"allow_edits":true`...)
		}
	case TypeSessionUpdated:
		dst = field(dst, "session_id", f.SessionID)
		dst = field(dst, "status", f.Status)
		dst = optField(dst, "tool_name", f.ToolName)
	}
	return append(dst, '}')
}

func field(dst []byte, name, value string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return AppendString(dst, value)
}

func optField(dst []byte, name, value string) []byte {
	if value == "" {
		return dst
	}
	return field(dst, name, value)
}

func boolField(dst []byte, name string, v bool) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	if v {
		return append(dst, `":true`...)
	}
	return append(dst, `":false`...)
}

func intField(dst []byte, name string, v int64) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendInt(dst, v)
}

// rawField writes raw when it is valid JSON, else def (a frame must stay valid JSON whatever a
// tool or model produced).
func rawField(dst []byte, name string, raw json.RawMessage, def string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	if len(raw) == 0 || !json.Valid(raw) {
		return append(dst, def...)
	}
	return append(dst, raw...)
}
