package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"svc/auth"
	"svc/runner/access"
	"svc/runner/loop"
	"svc/runner/sse"
	"svc/runner/streams"
)

// The AI SDK UI message stream protocol (v1), spoken by /chat/ai-stream so that the AI SDK's
// useChat works against the runtime unchanged. Every chunk is an SSE data line holding one
// JSON object; the stream ends with "data: [DONE]". The chunk shapes are the SDK's strict
// schemas (ui-message-chunks.ts): no extra fields, so frames are translated, not forwarded.
// Only fields that every v1 client accepts are used (for example finish carries no
// finishReason); the done reason, turns and usage travel in the finish chunk's
// messageMetadata, and frames without a protocol equivalent (warning, skill_activated,
// tool_log, tool_label_update, compaction_*) become transient data-<type> parts.
const aiStreamHeader = "x-vercel-ai-ui-message-stream"

// aiSink translates frames into UI message stream chunks.
type aiSink struct {
	w         *sse.Writer
	cancel    context.CancelCauseFunc
	now       func() time.Time
	buf       []byte
	messageID string
	sessionID string
	parts     int
	stepOpen  bool
	newStep   bool   // tool results arrived: the next content belongs to a new step
	textID    string // open text part
	reasonID  string // open reasoning part
	failed    bool
	// keep: the turn continues without its client (on_disconnect "continue"); a failed write
	// does not cancel it.
	keep bool
	// log, when set, takes every frame in the native protocol, numbered from 1 (the turn's log).
	log    streams.Writer
	seq    int64
	logBuf []byte
	denied map[string]bool // tool calls answered with tool-output-denied: their error result is not repeated
}

// Emit implements loop.Sink.
func (s *aiSink) Emit(f *sse.Frame) error {
	if s.log != nil {
		s.seq++
		s.logBuf = sse.AppendJSON(s.logBuf[:0], f, s.now())
		s.log.Append(s.seq, s.logBuf)
	}
	if s.failed {
		if s.keep {
			return nil
		}
		return sse.ErrClosed
	}
	b := s.buf[:0]
	switch f.Type {
	case sse.TypeInit:
		s.sessionID = f.SessionID
		b = s.chunk(b, `{"type":"start","messageId":`, s.messageID)
		b = append(b, `,"messageMetadata":{"session_id":`...)
		b = sse.AppendString(b, f.SessionID)
		b = append(b, "}}"...)
		if err := s.write(b); err != nil {
			return err
		}
	case sse.TypeTextDelta:
		if err := s.step(); err != nil {
			return err
		}
		if err := s.closeReasoning(); err != nil {
			return err
		}
		if s.textID == "" {
			s.textID = s.partID("text")
			if err := s.write(s.chunk(b, `{"type":"text-start","id":`, s.textID, "}")); err != nil {
				return err
			}
			b = s.buf[:0]
		}
		b = s.chunk(b, `{"type":"text-delta","id":`, s.textID)
		b = append(b, `,"delta":`...)
		b = sse.AppendString(b, f.Content)
		if err := s.write(append(b, '}')); err != nil {
			return err
		}
	case sse.TypeThinkingDelta:
		if err := s.step(); err != nil {
			return err
		}
		if err := s.closeText(); err != nil {
			return err
		}
		if s.reasonID == "" {
			s.reasonID = s.partID("reasoning")
			if err := s.write(s.chunk(b, `{"type":"reasoning-start","id":`, s.reasonID, "}")); err != nil {
				return err
			}
			b = s.buf[:0]
		}
		b = s.chunk(b, `{"type":"reasoning-delta","id":`, s.reasonID)
		b = append(b, `,"delta":`...)
		b = sse.AppendString(b, f.Content)
		if err := s.write(append(b, '}')); err != nil {
			return err
		}
	case sse.TypeToolCallStart:
		if f.ParentToolID != "" { // a nested card: inside its parent's step
			return s.toolInput(f)
		}
		if err := s.step(); err != nil {
			return err
		}
		if err := s.closeText(); err != nil {
			return err
		}
		if err := s.closeReasoning(); err != nil {
			return err
		}
		if err := s.toolInput(f); err != nil {
			return err
		}
	case sse.TypeConfirmationRequired:
		b = s.chunk(b, `{"type":"tool-approval-request","approvalId":`, f.CorrelationID)
		b = append(b, `,"toolCallId":`...)
		b = sse.AppendString(b, f.ToolID)
		if err := s.write(append(b, '}')); err != nil {
			return err
		}
		return s.dataPart(f) // endpoint, method and reason, which the chunk has no room for
	case sse.TypeDenied:
		if f.ToolID != "" {
			if s.denied == nil {
				s.denied = map[string]bool{}
			}
			s.denied[f.ToolID] = true
			if err := s.write(s.chunk(b, `{"type":"tool-output-denied","toolCallId":`, f.ToolID, "}")); err != nil {
				return err
			}
		}
		return s.dataPart(f) // timeout
	case sse.TypeToolCallResult:
		if s.denied[f.ToolID] {
			s.newStep = true
			return nil
		}
		if f.Status == sse.StatusError {
			b = s.chunk(b, `{"type":"tool-output-error","toolCallId":`, f.ToolID)
			b = append(b, `,"errorText":`...)
			msg := f.Error
			if msg == "" {
				msg = f.Content
			}
			b = sse.AppendString(b, msg)
		} else {
			b = s.chunk(b, `{"type":"tool-output-available","toolCallId":`, f.ToolID)
			b = append(b, `,"output":`...)
			if len(f.Result) > 0 && json.Valid(f.Result) {
				b = append(b, f.Result...)
			} else {
				b = sse.AppendString(b, f.Content)
			}
		}
		if f.ParentToolID == "" { // a nested card's result is not the end of its step
			s.newStep = true
		}
		if err := s.write(append(b, '}')); err != nil {
			return err
		}
	case sse.TypeError:
		b = append(b, `{"type":"error","errorText":`...)
		b = sse.AppendString(b, f.Message)
		if err := s.write(append(b, '}')); err != nil {
			return err
		}
	case sse.TypeDone:
		if err := s.closeText(); err != nil {
			return err
		}
		if err := s.closeReasoning(); err != nil {
			return err
		}
		if s.stepOpen {
			s.stepOpen = false
			if err := s.write(append(s.buf[:0], `{"type":"finish-step"}`...)); err != nil {
				return err
			}
		}
		b = append(s.buf[:0], `{"type":"finish","messageMetadata":{"session_id":`...)
		b = sse.AppendString(b, s.sessionID)
		b = append(b, `,"reason":`...)
		b = sse.AppendString(b, f.Reason)
		b = append(b, `,"turns":`...)
		b = strconv.AppendInt(b, int64(f.Turns), 10)
		if f.TraceID != "" {
			b = append(b, `,"trace_id":`...)
			b = sse.AppendString(b, f.TraceID)
		}
		if u := f.Usage; u != nil {
			b = append(b, `,"usage":{"input_tokens":`...)
			b = strconv.AppendInt(b, int64(u.InputTokens), 10)
			b = append(b, `,"output_tokens":`...)
			b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
			b = append(b, `,"cached_tokens":`...)
			b = strconv.AppendInt(b, int64(u.CachedTokens), 10)
			b = append(b, `,"total_tokens":`...)
			b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
			b = append(b, '}')
		}
		if err := s.write(append(b, "}}"...)); err != nil {
			return err
		}
		if err := s.write(append(s.buf[:0], "[DONE]"...)); err != nil {
			return err
		}
	default:
		return s.dataPart(f)
	}
	return nil
}

// toolInput writes the input chunks of a tool call. A nested card (a call a handler made with
// ctx.callTool) goes in the step of its parent: its tool-input-available carries the parent's
// tool call id in providerMetadata.svc.parentToolId, which useChat keeps on the tool part as
// callProviderMetadata.
func (s *aiSink) toolInput(f *sse.Frame) error {
	b := s.chunk(s.buf[:0], `{"type":"tool-input-start","toolCallId":`, f.ToolID)
	b = append(b, `,"toolName":`...)
	b = sse.AppendString(b, f.ToolName)
	if err := s.write(append(b, '}')); err != nil {
		return err
	}
	b = s.chunk(s.buf[:0], `{"type":"tool-input-available","toolCallId":`, f.ToolID)
	b = append(b, `,"toolName":`...)
	b = sse.AppendString(b, f.ToolName)
	b = append(b, `,"input":`...)
	b = appendRaw(b, f.Parameters, "{}")
	if f.ParentToolID != "" {
		b = append(b, `,"providerMetadata":{"svc":{"parentToolId":`...)
		b = sse.AppendString(b, f.ParentToolID)
		b = append(b, "}}"...)
	}
	return s.write(append(b, '}'))
}

// dataPart writes f as a transient data part, for frames the protocol has no chunk for.
func (s *aiSink) dataPart(f *sse.Frame) error {
	b := append(s.buf[:0], `{"type":"data-`...)
	b = append(b, f.Type...)
	b = append(b, `","data":`...)
	b = sse.AppendJSON(b, f, s.now())
	b = append(b, `,"transient":true}`...)
	return s.write(b)
}

// chunk appends prefix, the JSON string id, and suffixes.
func (s *aiSink) chunk(b []byte, prefix, id string, suffix ...string) []byte {
	b = append(b, prefix...)
	b = sse.AppendString(b, id)
	for _, x := range suffix {
		b = append(b, x...)
	}
	return b
}

func (s *aiSink) partID(kind string) string {
	s.parts++
	return kind + "-" + strconv.Itoa(s.parts)
}

// step opens a step before the content of a model call.
func (s *aiSink) step() error {
	if s.newStep && s.stepOpen {
		if err := s.closeText(); err != nil {
			return err
		}
		if err := s.closeReasoning(); err != nil {
			return err
		}
		s.stepOpen = false
		if err := s.write(append(s.buf[:0], `{"type":"finish-step"}`...)); err != nil {
			return err
		}
	}
	s.newStep = false
	if s.stepOpen {
		return nil
	}
	s.stepOpen = true
	return s.write(append(s.buf[:0], `{"type":"start-step"}`...))
}

func (s *aiSink) closeText() error {
	if s.textID == "" {
		return nil
	}
	id := s.textID
	s.textID = ""
	return s.write(s.chunk(s.buf[:0], `{"type":"text-end","id":`, id, "}"))
}

func (s *aiSink) closeReasoning() error {
	if s.reasonID == "" {
		return nil
	}
	id := s.reasonID
	s.reasonID = ""
	return s.write(s.chunk(s.buf[:0], `{"type":"reasoning-end","id":`, id, "}"))
}

func (s *aiSink) write(b []byte) error {
	s.buf = b[:0]
	if err := s.w.WriteData(b); err != nil {
		s.failed = true
		if s.keep {
			return nil
		}
		s.cancel(loop.ErrUserAbort)
		return err
	}
	return nil
}

func appendRaw(b, raw []byte, def string) []byte {
	if len(raw) == 0 || !json.Valid(raw) {
		return append(b, def...)
	}
	return append(b, raw...)
}

// chatAIStream serves POST /chat/ai-stream. It takes our chat body or useChat's
// {id, messages}: then the last user message is the turn's message and id the session.
func (rt *Runtime) chatAIStream(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var req chatRequest
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	req.fromUIMessages()
	t, err := rt.beginTurn(r.Context(), who, &req)
	if err != nil {
		return err
	}
	w.Header().Set(aiStreamHeader, "v1")
	rt.streamTurn(w, r, t, req.OnDisconnect, false, func(sw *sse.Writer, cancel context.CancelCauseFunc, keep bool, log streams.Writer) loop.Sink {
		return &aiSink{w: sw, cancel: cancel, keep: keep, log: log, now: rt.now, buf: make([]byte, 0, 256), messageID: auth.NewID("msg_")}
	})
	return nil
}
