package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/sse"
)

// ErrBadArguments is wrapped by errors about arguments a tool cannot use; the loop hands the
// message to the model so that it can correct the call.
var ErrBadArguments = errors.New("tools: bad arguments")

// Tool is one callable tool.
//
// Call runs the tool for one model call. It returns promptly once ctx is done. An error is a
// failed call: its message goes to the model as an error result. Implementations are safe for
// concurrent use (the loop runs the calls of one model turn in parallel).
type Tool interface {
	Spec() models.ToolSpec
	Call(ctx context.Context, call Call) (Result, error)
}

// Labeler is optionally implemented by a tool that gives its calls display labels, shown in
// tool_call_start frames (STYLE 8: an optional ability is its own interface).
type Labeler interface {
	Labels(args json.RawMessage) (running, completed string)
}

// Call is one invocation.
type Call struct {
	ID        string
	Arguments json.RawMessage // a JSON object
	Host      Host
	Session   Session
}

// Session is what a tool may know of the session it runs in.
type Session struct {
	ID string
	// Owner and ScopeID are the session's (spec 4.6): a durable run the call starts takes them.
	Owner   string
	ScopeID string
	// Context is the chat's context map (spec 2.5), for {{context.KEY}} templates. Read only.
	Context map[string]string
	// Calls counts the calls composite tools made to their children in this turn (nil: none
	// counted), so that they can be bounded per turn.
	Calls *atomic.Int64
	// Attachments are the files the user sent with this turn's message, those delivered to the
	// model and those kept for tools only (delivery "context"). Read only.
	Attachments []Attachment
	// Model is the model the session chose (spec 2.5 model: provider, model, effort); zero
	// when it chose none. The specialists a handler asks (ctx.callSubagent) run on it, as the
	// session does, and on the agent's models.main when it is zero.
	Model agent.ModelRef
	// Eval, when set, marks a session an eval runs: connection writes need the eval's
	// permission, and durable runs stop at their first pause.
	Eval *EvalPolicy
}

// EvalPolicy is what an eval allows its session (the "Allow writes:" line of its ## Setup).
type EvalPolicy struct {
	// AllowWrites names the connections the eval lets the agent write to; "*" is every one.
	AllowWrites []string
}

// MayWrite reports whether the eval allows mutating calls of connection conn.
func (p *EvalPolicy) MayWrite(conn string) bool {
	return p != nil && (slices.Contains(p.AllowWrites, "*") || slices.Contains(p.AllowWrites, conn))
}

// Attachment is a file the user sent with a message.
type Attachment struct {
	Filename string
	MimeType string
	Delivery string // "inline" or "context"
	Data     []byte
}

// Approver is optionally implemented by a tool some of whose calls need the user's approval
// before they run (CONTRACT §7, Approvals). The loop asks it before Call: a nil request runs
// the call; a request makes the call wait for the user's answer and run only if approved; an
// error refuses the call at once (an error result naming the rule), without asking.
type Approver interface {
	NeedsApproval(ctx context.Context, call Call) (*ApprovalRequest, error)
}

// ApprovalRequest says what a call that needs approval will do, for the user who decides
// (the confirmation_required frame).
type ApprovalRequest struct {
	Endpoint   string // what the call reaches: an API path, or the tool's name
	Method     string // an HTTP method, or "CALL" for a tool
	Reason     string // why it needs approval, for people
	Escalated  bool   // the rule that asks is stricter than the default for such a call
	Connection string // the connection, for a request call; "" otherwise
}

// Host is what a running tool may do besides returning its result. Its methods are safe for
// concurrent use.
type Host interface {
	// Emit sends a frame to the client (tool_log, tool_label_update, skill_activated). The
	// frame is encoded before Emit returns and is not kept.
	Emit(f *sse.Frame) error
	// ActivateSkill records that the session loaded a skill.
	ActivateSkill(name string)
	// NoteKnowledge records that the session read a knowledge document.
	NoteKnowledge(name string)
}

// Result is what a tool call produced.
type Result struct {
	// Content is the text the model receives.
	Content string
	// Data is an optional structured result (JSON) for the client's tool_call_result frame.
	Data json.RawMessage
	// IsError marks a result that reports a failure to the model without being a Go error.
	IsError bool
	// EndRun ends the run after this turn's tools (done reason model_stop).
	EndRun bool
	// Handoff names the agent the session switches to from the next model call on (the
	// handoff built-in); "" for none.
	Handoff string
	// Widget, when set, is streamed to the client as a widget frame after the call's result.
	Widget *Widget
}

// Widget is structured content for the client to render (spec 6.1 widget frame).
type Widget struct {
	Type string          // widget_type
	Data json.RawMessage // any JSON
}

// Set is the ordered set of tools offered to a model, with each tool's parameter schema
// compiled, for Check. It is immutable once built and safe for concurrent use.
type Set struct {
	list    []Tool
	byName  map[string]Tool
	specs   []models.ToolSpec
	schemas map[string]*schema // by tool name
	cache   *Schemas           // where they were compiled, for With
}

// NewSet returns a set of ts; a later tool with the name of an earlier one replaces it. It
// compiles the parameter schema of every tool (Check); Schemas.NewSet shares the compiled
// schemas between sets.
func NewSet(ts ...Tool) *Set { return (&Schemas{}).NewSet(ts...) }

// NewSet is the package's NewSet with the schemas compiled in c: a schema c compiled already
// (the same text) is not compiled again. A nil c compiles afresh.
func (c *Schemas) NewSet(ts ...Tool) *Set {
	if c == nil {
		c = &Schemas{}
	}
	s := &Set{byName: make(map[string]Tool, len(ts)), cache: c}
	for _, t := range ts {
		name := t.Spec().Name
		if _, dup := s.byName[name]; dup {
			for i := range s.list {
				if s.list[i].Spec().Name == name {
					s.list[i] = t
				}
			}
		} else {
			s.list = append(s.list, t)
		}
		s.byName[name] = t
	}
	for _, t := range s.list {
		s.specs = append(s.specs, t.Spec())
	}
	s.schemas = make(map[string]*schema, len(s.specs))
	for _, sp := range s.specs {
		s.schemas[sp.Name] = c.compile(sp.Parameters)
	}
	return s
}

// With returns a new set of s's tools followed by ts (which replace tools of the same name).
// Schemas s compiled are not compiled again.
func (s *Set) With(ts ...Tool) *Set {
	if s == nil {
		return NewSet(ts...)
	}
	return s.cache.NewSet(append(append([]Tool(nil), s.list...), ts...)...)
}

// Get returns the tool called name.
func (s *Set) Get(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	t, ok := s.byName[name]
	return t, ok
}

// Specs returns the specs to offer to the model, in order. The slice is shared: do not change it.
func (s *Set) Specs() []models.ToolSpec {
	if s == nil {
		return nil
	}
	return s.specs
}

// Names returns the tool names in order.
func (s *Set) Names() []string {
	if s == nil || len(s.specs) == 0 {
		return nil
	}
	names := make([]string, len(s.specs))
	for i, sp := range s.specs {
		names[i] = sp.Name
	}
	return names
}

// Len is the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.list)
}
