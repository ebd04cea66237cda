package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"svc/agent"
	"svc/runner/access"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/handlers"
	"svc/runner/sessions"
)

// runRecord is a durable session as the API answers it (CONTRACT §6).
type runRecord struct {
	SessionID       string          `json:"session_id"`
	ToolName        string          `json:"tool_name"`
	Status          string          `json:"status"`
	ParentSessionID string          `json:"parent_session_id"`
	DeployID        string          `json:"deploy_id"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	Pause           *pauseRecord    `json:"pause,omitempty"`
	AnsweredBy      string          `json:"answered_by,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           string          `json:"error,omitempty"`
}

type pauseRecord struct {
	Kind              string          `json:"kind"`
	Question          string          `json:"question"`
	Context           string          `json:"context,omitempty"`
	InputType         string          `json:"input_type"`
	Options           json.RawMessage `json:"options"`
	Payload           json.RawMessage `json:"payload,omitempty"`
	AllowEdits        bool            `json:"allow_edits"`
	EligibleAnswerers []string        `json:"eligible_answerers"`
	ExcludeAnswerers  []string        `json:"exclude_answerers,omitempty"`
	WakeAt            *time.Time      `json:"wake_at"`
	ExpiresAt         *time.Time      `json:"expires_at,omitempty"`
}

func recordOf(r durable.Run) runRecord {
	out := runRecord{SessionID: r.ID, ToolName: r.ToolName, Status: r.Status, ParentSessionID: r.ParentSessionID,
		DeployID: r.DeployID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, AnsweredBy: r.AnsweredBy,
		Result: r.Result, Error: r.Error}
	if p := r.Pause; p != nil && durable.Parked(r.Status) {
		out.Pause = &pauseRecord{Kind: p.Kind, Question: p.Question, Context: p.Context, InputType: p.InputType,
			Options: p.Options, Payload: p.Payload, AllowEdits: p.AllowEdits, EligibleAnswerers: p.EligibleAnswerers,
			ExcludeAnswerers: p.ExcludeAnswerers, WakeAt: p.WakeAt, ExpiresAt: p.ExpiresAt}
		if out.Pause.Options == nil {
			out.Pause.Options = json.RawMessage("[]")
		}
		if out.Pause.EligibleAnswerers == nil {
			out.Pause.EligibleAnswerers = []string{}
		}
	}
	return out
}

// respondent is how an answer names its author: the verified user, or "service" for a trusted
// caller without one.
func respondent(who access.Identity) string {
	if who.UserID != "" {
		return who.UserID
	}
	return "service"
}

// owns reports whether c may act on run as its owner would (spec 4.6 rules 2, 3, 6).
func owns(who access.Identity, run durable.Run) bool {
	if who.Scope != "" && run.ScopeID != who.Scope {
		return false
	}
	return run.Owner == "" || who.UserID == "" || run.Owner == who.UserID
}

// mayAnswer reports whether c may answer the pause p of run: never when excluded; with a list
// of eligible answerers, only a verified user on it; without one, whoever owns the run.
func mayAnswer(who access.Identity, run durable.Run, p *durable.Pause) bool {
	if who.Scope != "" && run.ScopeID != who.Scope {
		return false
	}
	if who.UserID != "" && slices.Contains(p.ExcludeAnswerers, who.UserID) {
		return false
	}
	if len(p.EligibleAnswerers) > 0 {
		return who.UserID != "" && slices.Contains(p.EligibleAnswerers, who.UserID)
	}
	return owns(who, run)
}

// seesRun reports whether c may see run at all: its owner, an answerer of its pause, or who
// answered it last.
func seesRun(who access.Identity, run durable.Run) bool {
	switch {
	case owns(who, run):
		return true
	case who.Scope != "" && run.ScopeID != who.Scope:
		return false
	case who.UserID != "" && run.AnsweredBy == who.UserID:
		return true
	}
	return run.Pause != nil && mayAnswer(who, run, run.Pause)
}

// durableRoutes serve the durable sessions of a runtime's deployment: thin calls to its engine.
type durableRoutes struct {
	runs *engine.Engine
	dep  engine.Deployment
}

// durableTool returns the Deployment.Tool of the deployment deployID of ag, whose handlers
// compile compiles.
func durableTool(ag *agent.Agent, deployID string, compile func(*agent.Tool) (*handlers.Tool, error)) func(name string) (*handlers.Tool, error) {
	return func(name string) (*handlers.Tool, error) {
		t := ag.Tools[name]
		if t == nil || !t.Durable() || compile == nil {
			return nil, fmt.Errorf("the agent of deployment %s has no durable tool %s", deployID, name)
		}
		return compile(t)
	}
}

// find is the durable session of the request's {id}: 404 when there is none, or when c may
// neither own it nor answer it (hidden like a missing one, spec 4.6 rule 2).
func (d *durableRoutes) find(r *http.Request, who access.Identity) (durable.Run, error) {
	id := r.PathValue("id")
	run, err := d.runs.Get(r.Context(), d.dep.AgentID, id)
	switch {
	case errors.Is(err, durable.ErrNotFound):
		return durable.Run{}, &APIError{Code: CodeNotFound, Message: "no durable session " + id}
	case err != nil:
		return durable.Run{}, err
	case who.Scope != "" && run.ScopeID != who.Scope:
		return durable.Run{}, &APIError{Code: CodeNotFound, Message: "no durable session " + id}
	}
	return run, nil
}

// get serves GET /api/sessions/{id}: the durable session's record, for its owner and for
// whoever may answer it (or answered it last).
func (d *durableRoutes) get(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	run, err := d.find(r, who)
	if err != nil {
		return err
	}
	if !seesRun(who, run) {
		return &APIError{Code: CodeNotFound, Message: "no durable session " + run.ID}
	}
	writeJSON(w, http.StatusOK, recordOf(run))
	return nil
}

// answerRequest is the body of POST /api/sessions/{id}/answer.
type answerRequest struct {
	Value json.RawMessage `json:"value"`
	Edits json.RawMessage `json:"edits"`
}

// answer serves POST /api/sessions/{id}/answer: it checks the caller may answer, records the
// answer once and claims the run, answers with the record (status running), and the engine
// resumes the run in the background (spec 3.2, 4.4, 7; CONTRACT §6): however long the handler
// takes, the answer does not wait for it.
func (d *durableRoutes) answer(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var body answerRequest
	if err := readJSON(w, r, &body); err != nil {
		return err
	}
	run, err := d.find(r, who)
	if err != nil {
		return err
	}
	// A run the caller may not see is missing to it, whatever its state (CONTRACT §8): only
	// who can see it learns that it may not answer.
	if !seesRun(who, run) {
		return &APIError{Code: CodeNotFound, Message: "no durable session " + run.ID}
	}
	p := run.Pause
	if run.Status != durable.AwaitingInput || p == nil {
		return notAwaiting(run)
	}
	if !mayAnswer(who, run, p) {
		return &APIError{Code: CodeNotEligible, Message: notEligible(who, p)}
	}
	value, err := answerValue(p, body, respondent(who))
	if err != nil {
		return err
	}
	claimed, err := d.runs.Answer(r.Context(), run, value, respondent(who))
	if errors.Is(err, durable.ErrStale) || errors.Is(err, durable.ErrRecorded) {
		return notAwaiting(claimed)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recordOf(claimed))
	return nil
}

// notAwaiting is the 409 of an answer to a run that waits for none.
func notAwaiting(run durable.Run) error {
	return &APIError{Code: CodeNotAwaiting, Message: fmt.Sprintf("durable session %s is %s, not awaiting input", run.ID, run.Status),
		AnsweredBy: run.AnsweredBy}
}

func notEligible(who access.Identity, p *durable.Pause) string {
	switch {
	case who.UserID == "" && len(p.EligibleAnswerers) > 0:
		return "this pause may be answered only by its eligible answerers; send a runtime token minted with the user_id of one of them"
	case len(p.EligibleAnswerers) > 0:
		return "user " + who.UserID + " is not an eligible answerer of this pause"
	}
	return "user " + who.UserID + " may not answer this pause"
}

// answerValue checks the posted value against the pause (CONTRACT §6) and returns the answer
// the handler receives: {value, respondedBy, edits?} for requestInput, {approved, respondedBy,
// note?, edits?} for waitForApproval.
//
// null is never an answer: encoding/json would read it into a bool or a string as their zero
// value without an error, so every type is checked on the raw JSON.
func answerValue(p *durable.Pause, body answerRequest, by string) (json.RawMessage, error) {
	if len(body.Value) == 0 {
		return nil, invalid("value", "is required")
	}
	if isNull(body.Value) {
		return nil, invalid("value", "is null; %s", answerWants(p))
	}
	out := map[string]any{"respondedBy": by}
	if len(body.Edits) > 0 && string(body.Edits) != "null" {
		if !p.AllowEdits {
			return nil, invalid("edits", "this pause does not allow edits (allowEdits is not set)")
		}
		out["edits"] = body.Edits
	}
	if p.Kind == durable.PauseApproval {
		if yes, ok := jsonBool(body.Value); ok {
			out["approved"] = yes
			return json.Marshal(out)
		}
		var o struct {
			Approved json.RawMessage `json:"approved"`
			Note     json.RawMessage `json:"note"`
		}
		dec := json.NewDecoder(bytes.NewReader(body.Value))
		dec.DisallowUnknownFields()
		if dec.Decode(&o) != nil {
			return nil, invalid("value", "%s", answerWants(p))
		}
		yes, ok := jsonBool(o.Approved)
		if !ok {
			return nil, invalid("value", "approved must be true or false; %s", answerWants(p))
		}
		out["approved"] = yes
		if o.Note != nil {
			note, ok := jsonString(o.Note)
			if !ok {
				return nil, invalid("value", "note must be a string; %s", answerWants(p))
			}
			out["note"] = note
		}
		return json.Marshal(out)
	}
	switch p.InputType {
	case handlers.InputYesNo:
		if _, ok := jsonBool(body.Value); !ok {
			return nil, invalid("value", "%s", answerWants(p))
		}
	case handlers.InputChoice:
		if err := checkChoice(p.Options, body.Value); err != nil {
			return nil, err
		}
	default:
		if _, ok := jsonString(body.Value); !ok {
			return nil, invalid("value", "%s", answerWants(p))
		}
	}
	out["value"] = body.Value
	return json.Marshal(out)
}

// answerWants says what answers pause p.
func answerWants(p *durable.Pause) string {
	switch {
	case p.Kind == durable.PauseApproval:
		return "it answers a yes/no approval: true, false or {approved, note?}"
	case p.InputType == handlers.InputYesNo:
		return "it answers a yes/no question: true or false"
	case p.InputType == handlers.InputChoice:
		return "it answers a choice: one of the options' values, or a list of them"
	}
	return "it answers a text question: a string"
}

// isNull reports whether raw is JSON null.
func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonBool is the value of raw when it is JSON true or false (not null, not "true").
func jsonBool(raw json.RawMessage) (yes, ok bool) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// jsonString is the value of raw when it is a JSON string (not null).
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if isNull(raw) || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// checkChoice accepts one of the options' values, or a non-empty list of them.
func checkChoice(options, value json.RawMessage) error {
	var opts []struct {
		Value json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(options, &opts) // written by handlers.checkOptions
	allowed := make([]string, 0, len(opts))
	for _, o := range opts {
		allowed = append(allowed, compactJSON(o.Value))
	}
	var list []json.RawMessage
	if value[0] == '[' && json.Unmarshal(value, &list) == nil {
		if len(list) == 0 {
			return invalid("value", "chooses nothing: give one of %v, or a list of them", allowed)
		}
	} else {
		list = []json.RawMessage{value}
	}
	for _, v := range list {
		if !slices.Contains(allowed, compactJSON(v)) {
			return invalid("value", "%s is not one of the options: %v", compactJSON(v), allowed)
		}
	}
	return nil
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// cancel serves POST /api/sessions/{id}/cancel: a run that has not ended is cancelled.
func (d *durableRoutes) cancel(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	if err := discardBody(w, r); err != nil {
		return err
	}
	run, err := d.find(r, who)
	if err != nil {
		return err
	}
	if !seesRun(who, run) {
		return &APIError{Code: CodeNotFound, Message: "no durable session " + run.ID}
	}
	cancelled, err := d.runs.Cancel(r.Context(), d.dep.AgentID, run.ID)
	if errors.Is(err, durable.ErrStale) {
		return &APIError{Code: CodeNotAwaiting, Message: fmt.Sprintf("durable session %s has ended: %s", run.ID, cancelled.Status), AnsweredBy: cancelled.AnsweredBy}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recordOf(cancelled))
	return nil
}

// restart serves POST /api/sessions/{id}/restart: a new run of the same tool with the same
// input (on this runtime's deployment), answered with the new run's record.
func (d *durableRoutes) restart(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	if err := discardBody(w, r); err != nil {
		return err
	}
	run, err := d.find(r, who)
	if err != nil {
		return err
	}
	if !owns(who, run) {
		return &APIError{Code: CodeNotFound, Message: "no durable session " + run.ID}
	}
	if _, err := d.dep.Tool(run.ToolName); err != nil {
		return &APIError{Code: CodeInvalidRequest, Message: err.Error()}
	}
	next, err := d.runs.StartRun(r.Context(), durable.Run{AgentID: d.dep.AgentID, DeployID: d.dep.DeployID, ToolName: run.ToolName,
		ParentSessionID: run.ParentSessionID, Owner: run.Owner, ScopeID: run.ScopeID, Input: run.Input, Context: run.Context,
		Model: run.Model}, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recordOf(next))
	return nil
}

// pending serves GET /sessions/pending-approvals: the parked runs of the agent the caller may
// answer (spec 4.3, 4.6; CONTRACT §6).
func (d *durableRoutes) pending(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	runs, err := d.runs.List(r.Context(), durable.Filter{AgentID: d.dep.AgentID, Statuses: []string{durable.AwaitingInput}, Limit: sessions.DefaultListLimit})
	if err != nil {
		return err
	}
	out := make([]runRecord, 0, len(runs))
	for _, run := range runs {
		if run.Pause != nil && mayAnswer(who, run, run.Pause) {
			out = append(out, recordOf(run))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
	return nil
}

// discardBody reads an optional JSON body that carries nothing: empty, or an object.
func discardBody(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength == 0 {
		return nil
	}
	var v map[string]json.RawMessage
	return readJSON(w, r, &v)
}
