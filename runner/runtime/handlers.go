package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"svc/agent"
	"svc/runner/attachments"
	"svc/runner/handlers"
	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sse"
	"svc/runner/stores"
	"svc/runner/tools"
)

// handlerTools returns the maker of the agent's handler tools (svc/tools): compiled once per
// runtime, each with the children its ctx.callTool may reach. A durable tool is offered to the
// model as the durable engine's tool, which starts a run of it.
func (rt *Runtime) handlerTools(records *stores.Records) func(*agent.Tool) (tools.Tool, error) {
	key := rt.opts.AgentID
	if key == "" {
		key = rt.opts.DeployID
	}
	var newHandler func(t *agent.Tool) (*handlers.Tool, error)
	// child resolves a name of uses.tools: a store tool, another inline handler tool, a
	// built-in, or the connections' request tool (which only durable handlers may call).
	child := func(name string) (tools.Tool, error) {
		if _, action, ok := agent.ParseStoreToolName(name); ok {
			for store := range rt.ag.Stores {
				if agent.StoreToolName(store, action) == name {
					return stores.NewTool(records, store, action)
				}
			}
		}
		if t := rt.ag.Tools[name]; t != nil {
			if t.Durable() {
				return nil, fmt.Errorf("%s is a durable tool, which a tool cannot call", name)
			}
			h, err := newHandler(t)
			if err != nil || !t.RequiresConfirmation {
				return h, err
			}
			return confirming{h}, nil
		}
		switch name {
		case tools.NameLoadKnowledge:
			return tools.NewLoadKnowledge(rt.ag.Knowledge), nil
		case tools.NameLoadSkill:
			return tools.NewLoadSkill(rt.ag.Skills), nil
		case agent.ConnectionToolName:
			if rt.conns != nil && len(rt.conns.RESTNames()) > 0 {
				return rt.conns.Tool(rt.conns.RESTNames())
			}
		}
		return nil, fmt.Errorf("no tool %s for a handler to call", name)
	}
	newHandler = func(t *agent.Tool) (*handlers.Tool, error) {
		return handlers.New(t, handlers.Options{Sandbox: rt.opts.Sandbox, Key: key, Children: child, Subagent: rt.subagent,
			Timeout: rt.opts.HandlerTimeout, MaxDepth: rt.opts.CompositeMaxDepth, MaxCalls: rt.opts.CompositeMaxCalls,
			Schemas: rt.schemas})
	}
	rt.durableHandler = newHandler
	return func(t *agent.Tool) (tools.Tool, error) {
		h, err := newHandler(t)
		switch {
		case err != nil:
			return nil, err
		case t.Durable():
			return rt.runs.Tool(rt.opts.AgentID, rt.opts.DeployID, h), nil
		case t.RequiresConfirmation:
			return confirming{h}, nil
		}
		return h, nil
	}
}

// subagent runs the named agent's loop on task for a handler's ctx.callSubagent: its own
// instructions and tools, the session's model (spec 2.5; models.main when the session chose
// none), no summary call; its activity streams as
// subagent_event frames of the handler's call. A run that ends in error is a hard failure.
func (rt *Runtime) subagent(ctx context.Context, name, task string, input json.RawMessage, files []tools.Attachment, call tools.Call) (string, error) {
	_, prof, err := rt.profiles.Resolve(name, "")
	if err != nil || prof == nil {
		return "", fmt.Errorf("no agent %s", name)
	}
	// The session's model, as its turns pick it: its choice, else models.main, else the default.
	m := call.Session.Model
	ref, _ := rt.turns.ModelRef(&sessions.Session{Model: sessions.Model{Provider: m.Provider, Model: m.Model, Effort: m.Effort}})
	provider, err := rt.models(ref)
	if err != nil {
		return "", fmt.Errorf("model %s/%s is not available: %w", ref.Provider, ref.Model, err)
	}
	text := task
	if len(input) > 0 {
		text += "\n\nInput:\n" + string(input)
	}
	res := loop.Run(ctx, &loop.Params{
		Provider: provider, ProviderName: ref.Provider, Model: ref.Model, Effort: ref.Effort,
		ContextWindow: rt.opts.ContextWindow, System: prof.System(call.Session.Context),
		Input: []models.Message{{Role: models.RoleUser, Content: text, Parts: specialistParts(name, files, call.Host)}}, Tools: prof.Tools.Set,
		MaxTurns: rt.opts.MaxTurns, Subagent: true, Session: call.Session, Logger: rt.log,
		Sink: &subagentSink{host: call.Host, parent: call.ID, agent: name},
	})
	if res.Reason == loop.ReasonError || res.Reason == loop.ReasonUserAbort {
		if res.Err != nil {
			return "", fmt.Errorf("agent %s: %w", name, res.Err)
		}
		return "", fmt.Errorf("agent %s stopped: %s", name, res.Reason)
	}
	for i := len(res.Messages) - 1; i >= 0; i-- {
		if m := res.Messages[i]; m.Role == models.RoleAssistant && m.Content != "" {
			return m.Content, nil
		}
	}
	return "", nil
}

// subagentSink turns a subagent's frames into subagent_event frames of the parent call.
type subagentSink struct {
	host   tools.Host
	parent string
	agent  string
	tools  map[string]string // tool id → name, for results
}

// Emit implements loop.Sink.
func (s *subagentSink) Emit(f *sse.Frame) error {
	ev := sse.Frame{Type: sse.TypeSubagentEvent, ParentToolID: s.parent, AgentName: s.agent}
	switch f.Type {
	case sse.TypeTextDelta:
		ev.EventType, ev.Text = "text", f.Content
	case sse.TypeToolCallStart:
		if s.tools == nil {
			s.tools = map[string]string{}
		}
		s.tools[f.ToolID] = f.ToolName
		ev.EventType, ev.ToolName, ev.ToolArgs = "tool_call", f.ToolName, f.Parameters
	case sse.TypeToolCallResult:
		ev.EventType, ev.ToolName, ev.Result, ev.Error = "tool_result", s.tools[f.ToolID], f.Result, f.Error
		if len(ev.Result) == 0 && f.Error == "" {
			ev.Text = f.Content
		}
	case sse.TypeError:
		ev.EventType, ev.Error = "error", f.Message
	default:
		return nil
	}
	if s.host == nil {
		return nil
	}
	return s.host.Emit(&ev)
}

// specialistParts are the files a handler passes to specialist name, as parts of its user
// message, the way a chat message's attachments reach the main model: a type the model takes
// as it is, an Office, OpenDocument or RTF file converted to text (and its images). A file the
// model cannot take (a type it does not read, one that does not convert, a context file never
// converted) is left off the message with a warning frame to the client, instead of failing the
// whole specialist call (spec 4.7).
func specialistParts(name string, files []tools.Attachment, host tools.Host) []models.Part {
	var parts []models.Part
	var warnings []string
	var budget attachments.Budget
	for _, f := range files {
		mt := mediaType(f.MimeType)
		switch {
		case len(f.Data) == 0:
			warnings = append(warnings, "attachment "+f.Filename+" was left off the message of specialist "+name+": it is empty")
		case attachmentKind(mt) == kindDirect:
			parts = append(parts, models.Part{MimeType: mt, Data: f.Data, Filename: f.Filename})
		case attachmentKind(mt) == kindConverted:
			conv, left, err := convertedParts(f.Filename, mt, f.Data, &budget)
			if err != nil {
				warnings = append(warnings, "attachment "+f.Filename+" was left off the message of specialist "+name+": "+err.Error())
				continue
			}
			parts, warnings = append(parts, conv...), append(warnings, left...)
		default:
			warnings = append(warnings, "attachment "+f.Filename+" was left off the message of specialist "+name+": the model cannot take "+f.MimeType+" files")
		}
	}
	if host != nil {
		for _, w := range warnings {
			_ = host.Emit(&sse.Frame{Type: sse.TypeWarning, Message: w}) // a failed emit ends the turn
		}
	}
	return parts
}
