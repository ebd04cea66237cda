package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"svc/auth"

	"svc/runner/durable"
	"svc/runner/handlers"
	"svc/runner/models"
	"svc/runner/sse"
	"svc/runner/tools"
)

// Tool is the durable tool h of the deployment deployID of agentID as the model sees it: a call
// starts a run (its own session) and executes it until it finishes or parks. A parked run gives
// the model an asynchronous-start result and the client durable_approval_required (spec 3.2,
// 6.1). The deployment must be attached while the tool is called.
func (e *Engine) Tool(agentID, deployID string, h *handlers.Tool) tools.Tool {
	return &startTool{e: e, agentID: agentID, deployID: deployID, h: h}
}

type startTool struct {
	e                 *Engine
	agentID, deployID string
	h                 *handlers.Tool
}

// Spec implements tools.Tool.
func (d *startTool) Spec() models.ToolSpec { return d.h.Spec() }

// Call implements tools.Tool.
func (d *startTool) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return tools.Result{}, fmt.Errorf("%w: arguments are not JSON", tools.ErrBadArguments)
	}
	id := auth.NewID("dur_")
	host := call.Host
	if host != nil {
		host = &cardHost{Host: host, run: id, card: call.ID}
	}
	run, err := d.e.StartRun(ctx, durable.Run{ID: id, AgentID: d.agentID, DeployID: d.deployID, ToolName: d.h.Spec().Name,
		ParentSessionID: call.Session.ID, Owner: call.Session.Owner, ScopeID: call.Session.ScopeID, Input: args,
		Context: call.Session.Context, Model: durable.Model{Provider: call.Session.Model.Provider, Model: call.Session.Model.Model,
			Effort: call.Session.Model.Effort}}, host)
	if err != nil {
		return tools.Result{}, err
	}
	if call.Session.Eval != nil && durable.Parked(run.Status) {
		// An eval never runs a durable tool past its first pause: nobody will answer it.
		cancelled, err := d.e.Cancel(ctx, run.AgentID, run.ID)
		if err == nil {
			b, _ := json.Marshal(map[string]any{"session_id": run.ID, "status": cancelled.Status, "paused_at": run.Pause.Kind,
				"question": run.Pause.Question, "message": "The run reached its first pause and was cancelled: an eval does not wait for answers."})
			return tools.Result{Content: string(b), Data: b}, nil
		}
	}
	switch run.Status {
	case durable.Completed:
		return resultOf(run.Result), nil
	case durable.Failed:
		return tools.Result{}, errors.New(run.Error)
	case durable.AwaitingInput:
		if call.Host != nil {
			p := run.Pause
			_ = call.Host.Emit(&sse.Frame{Type: sse.TypeDurableApproval, SessionID: run.ID, ToolName: run.ToolName,
				Question: p.Question, Options: p.Options, AllowEdits: p.AllowEdits})
		}
	}
	return asyncStart(run), nil
}

// resultOf is the tool result of a completed run's JSON result.
func resultOf(raw json.RawMessage) tools.Result {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return tools.Result{Content: s}
	}
	if len(raw) == 0 || string(raw) == "null" {
		return tools.Result{}
	}
	return tools.Result{Content: string(raw), Data: raw}
}

// asyncStart is what the model learns of a run that did not finish in the call.
func asyncStart(run durable.Run) tools.Result {
	out := map[string]any{"session_id": run.ID, "status": run.Status}
	switch run.Status {
	case durable.AwaitingInput:
		out["message"] = "Started; the run waits for an answer to: " + run.Pause.Question + " It resumes by itself once answered; do not start it again."
	case durable.Sleeping:
		out["wake_at"] = run.Pause.WakeAt
		out["message"] = "Started; the run sleeps and resumes by itself at wake_at."
	default:
		out["message"] = "Started; the run goes on in the background."
	}
	b, _ := json.Marshal(out) // plain values: cannot fail
	return tools.Result{Content: string(b), Data: b}
}

// cardHost passes the frames of a durable run's first execution to the chat whose tool call
// started it. The handler runs as a call whose id is the run's, so its frames name the run:
// the card of its tool_label_update, and the parent_tool_id of its nested cards (ctx.callTool)
// and subagent_event frames. cardHost names the chat's tool call instead, the card the client
// shows, and renames the ids of the nested calls ("<run>.1" becomes "<card>.1").
type cardHost struct {
	tools.Host
	run, card string
}

// Emit implements tools.Host.
func (c *cardHost) Emit(f *sse.Frame) error {
	id, parent := c.rename(f.ToolID), c.rename(f.ParentToolID)
	if id == f.ToolID && parent == f.ParentToolID {
		return c.Host.Emit(f)
	}
	g := *f
	g.ToolID, g.ParentToolID = id, parent
	return c.Host.Emit(&g)
}

func (c *cardHost) rename(id string) string {
	if id == c.run {
		return c.card
	}
	if rest, ok := strings.CutPrefix(id, c.run+"."); ok {
		return c.card + "." + rest
	}
	return id
}
