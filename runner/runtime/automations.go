package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"svc/agent"
	"svc/automations"
	"svc/registry"
	"svc/runner/access"
	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sse"
	"svc/runner/stores"
	"svc/runner/turn"
)

// MaxEventBytes bounds the body of an event trigger's delivery: it travels in the fire's queue
// task and into the run's message or params.
const MaxEventBytes = 256 << 10

// The triggers of a fire, as the queue task and the fire's run name them.
const (
	TriggerSchedule = "schedule" // a cron, every or at time
	TriggerRun      = "run"      // POST /api/automations/{id}/run
	TriggerEvent    = "event"    // POST /api/automations/{id}/events
	TriggerStore    = "store"    // a write of a matching store record
)

// Automations is what the automation routes need of the platform (CONTRACT §9): the store of
// automations and the queue their fires run through. cmd/svc wires registry's store and the
// platform queue; a runtime without it (svc dev) answers the routes 404 with the reason.
type Automations struct {
	Store *registry.Automations
	// Fire enqueues the run of a fire the runtime recorded (run now, an event, a store write).
	Fire func(ctx context.Context, f AutomationFire) error
}

// AutomationFire is a recorded fire to run through the queue (its event is kept with the fire).
type AutomationFire struct {
	AutomationID string
	FireTime     time.Time
	Trigger      string
}

// automationRoutes serve /api/automations and match store writes against store triggers.
type automationRoutes struct {
	host    *Automations // nil: not served
	ag      *agent.Agent
	agentID string
	now     func() time.Time
	log     *slog.Logger
}

// errNoAutomations answers the routes of a runtime without the platform's automations.
var errNoAutomations = &APIError{Code: CodeNotFound, Message: "automations run on the platform (svc up, or svc api with workers and runners); svc dev does not serve them"}

// automationView is an automation as the routes answer it: the record with its server-held
// fields. Secret is set only in the answer of the POST that created an event trigger.
type automationView struct {
	ID string `json:"id"`
	*automations.Automation
	ScopeID        string     `json:"scope_id"`
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	Secret         string     `json:"secret,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	NextFireAt     *time.Time `json:"next_fire_at"`
	LastFireAt     *time.Time `json:"last_fire_at"`
}

func viewOf(a registry.Automation) (automationView, error) {
	rec, err := automations.Decode(a.Spec)
	if err != nil {
		return automationView{}, fmt.Errorf("automation %s: stored record: %w", a.ID, err)
	}
	rec.Enabled = nil // the row's flag is the truth: shown once, below
	return automationView{ID: a.ID, Automation: rec, ScopeID: a.OwnerScope, Enabled: a.Enabled, DisabledReason: a.DisabledReason,
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, NextFireAt: a.NextFireAt, LastFireAt: a.LastFireAt}, nil
}

// ownerScope is the owner scope of who's automations, with the scope_id a trusted caller may
// name (query, or the body's scope_id).
func ownerScope(who access.Identity, requested string) (string, error) {
	scope, err := automations.OwnerScope(who.Scope, who.UserID, who.Trusted(), requested)
	var fe *automations.FieldError
	switch {
	case errors.As(err, &fe):
		return "", &APIError{Code: CodeScopeForbidden, Field: fe.Field, Message: fe.Error()}
	case err != nil:
		return "", &APIError{Code: CodeForbidden, Message: "this credential can own no automation: it has no scope claim, no verified user and is not trusted"}
	}
	return scope, nil
}

// fieldErrors turns Validate's and Decode's errors into a 400 naming the first field, with
// every problem in the message.
func fieldErrors(err error) error {
	var fe *automations.FieldError
	if errors.As(err, &fe) {
		return &APIError{Code: CodeInvalidRequest, Field: fe.Field, Message: strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	return invalid("body", "%v", err)
}

// mine returns the automation of the path's id when who's owner scope holds it; else 404, the
// same answer as an unknown id.
func (a *automationRoutes) mine(r *http.Request, who access.Identity) (registry.Automation, error) {
	if a.host == nil {
		return registry.Automation{}, errNoAutomations
	}
	scope, err := ownerScope(who, r.URL.Query().Get("scope_id"))
	if err != nil {
		return registry.Automation{}, err
	}
	got, err := a.host.Store.Get(r.Context(), a.agentID, r.PathValue("id"))
	switch {
	case errors.Is(err, registry.ErrAutomationNotFound), err == nil && got.OwnerScope != scope:
		return registry.Automation{}, &APIError{Code: CodeNotFound, Message: "no automation " + strconv.Quote(r.PathValue("id")) + " in this caller's scope"}
	case err != nil:
		return registry.Automation{}, err
	}
	return got, nil
}

// list serves GET /api/automations: the caller's owner scope's automations, newest first.
func (a *automationRoutes) list(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	if a.host == nil {
		return errNoAutomations
	}
	scope, err := ownerScope(who, r.URL.Query().Get("scope_id"))
	if err != nil {
		return err
	}
	q, err := pageQuery(r)
	if err != nil {
		return err
	}
	page, next, err := a.host.Store.List(r.Context(), a.agentID, scope, registry.AutomationQuery{Limit: q.limit, Before: q.before})
	if errors.Is(err, registry.ErrBadCursor) {
		return invalid("cursor", "is not a cursor of this list")
	}
	if err != nil {
		return err
	}
	out := make([]automationView, 0, len(page))
	for _, au := range page {
		v, err := viewOf(au)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"automations": out, "next_cursor": cursorText(next)})
	return nil
}

// page is a list route's limit and cursor.
type page struct {
	limit  int
	before registry.Cursor
}

func pageQuery(r *http.Request) (page, error) {
	var p page
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return page{}, invalid("limit", "must be a whole number from 1 to 500, got %q", v)
		}
		p.limit = n
	}
	if v := r.URL.Query().Get("cursor"); v != "" {
		c, err := registry.ParseCursor(v)
		if err != nil {
			return page{}, invalid("cursor", "is not a cursor of this list")
		}
		p.before = c
	}
	return p, nil
}

func cursorText(c registry.Cursor) string {
	if c.IsZero() {
		return ""
	}
	return c.String()
}

// readRecord reads a body of at most MaxBodyBytes as a JSON object, and takes out its
// scope_id member (the owner scope a trusted caller names).
func readRecord(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, string, error) {
	var body map[string]json.RawMessage
	if err := readJSON(w, r, &body); err != nil {
		return nil, "", err
	}
	var scope string
	if raw, ok := body["scope_id"]; ok {
		if err := json.Unmarshal(raw, &scope); err != nil {
			return nil, "", invalid("scope_id", "must be a string")
		}
		delete(body, "scope_id")
	}
	return body, scope, nil
}

// create serves POST /api/automations: the record validated against the agent, saved in the
// caller's owner scope with the caller as its saver; an event trigger's secret is answered once.
func (a *automationRoutes) create(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	if a.host == nil {
		return errNoAutomations
	}
	body, requested, err := readRecord(w, r)
	if err != nil {
		return err
	}
	if requested == "" {
		requested = r.URL.Query().Get("scope_id")
	}
	scope, err := ownerScope(who, requested)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(body) // a decoded object marshals
	rec, err := automations.Decode(raw)
	if err != nil {
		return fieldErrors(err)
	}
	now := a.now()
	if err := automations.Validate(rec, a.ag, now); err != nil {
		return fieldErrors(err)
	}
	var secret string
	if rec.Trigger.Event {
		if secret, err = automations.NewSecret(); err != nil {
			return err
		}
	}
	spec, _ := json.Marshal(rec) // a decoded record marshals
	saved, err := a.host.Store.Create(r.Context(), registry.Automation{AgentID: a.agentID, OwnerScope: scope, Saver: saverOf(who, scope),
		Name: rec.Name, Spec: spec, Enabled: rec.IsEnabled(), EventSecret: secret})
	if err != nil {
		return err
	}
	// every counts from the record's creation time as stored.
	return a.answerScheduled(w, r, saved, rec, now, http.StatusCreated, secret)
}

// saverOf is who as the saver of an automation in owner scope.
func saverOf(who access.Identity, owner string) registry.AutomationSaver {
	s := registry.AutomationSaver{UserID: who.UserID, CredentialKind: string(who.Method), CredentialID: who.CredentialID,
		Email: who.Email, EmailVerified: who.EmailVerified, OrgID: who.OrgID, Groups: who.Groups}
	switch {
	case who.Scope != "":
		s.ScopeID = who.Scope
	case who.Trusted():
		s.ScopeID = owner // the scope_id it named, or the agent level
	}
	return s
}

// schedule sets the next fire time of saved from rec (its every counting from the stored
// creation time) after now, when it is enabled and has a schedule; nil otherwise.
func (a *automationRoutes) schedule(ctx context.Context, saved registry.Automation, rec *automations.Automation, now time.Time) (registry.Automation, error) {
	var next *time.Time
	if saved.Enabled {
		rec.Created = saved.CreatedAt
		if s, err := rec.Schedule(); err == nil {
			if t, ok := s.Next(now); ok {
				next = &t
			}
		}
	}
	if next == nil && saved.NextFireAt == nil {
		return saved, nil
	}
	return a.host.Store.Update(ctx, a.agentID, saved.ID, registry.AutomationUpdate{SetNextFire: true, NextFireAt: next})
}

// answerScheduled sets the next fire time of saved (schedule) and answers it with status, and
// with secret when not empty (an event trigger's, once).
func (a *automationRoutes) answerScheduled(w http.ResponseWriter, r *http.Request, saved registry.Automation, rec *automations.Automation, now time.Time, status int, secret string) error {
	saved, err := a.schedule(r.Context(), saved, rec, now)
	if err != nil {
		return err
	}
	v, err := viewOf(saved)
	if err != nil {
		return err
	}
	v.Secret = secret
	writeJSON(w, status, v)
	return nil
}

// get serves GET /api/automations/{id}.
func (a *automationRoutes) get(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	au, err := a.mine(r, who)
	if err != nil {
		return err
	}
	v, err := viewOf(au)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// patch serves PATCH /api/automations/{id}: the members sent replace the record's (null
// removes an optional one), the result validated as on create; {"enabled": false} pauses it,
// {"enabled": true} resumes it and clears a disabled_reason. The next fire is computed again.
func (a *automationRoutes) patch(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	au, err := a.mine(r, who)
	if err != nil {
		return err
	}
	body, requested, err := readRecord(w, r)
	if err != nil {
		return err
	}
	if requested != "" && requested != au.OwnerScope {
		return invalid("scope_id", "an automation cannot move to another scope; create it there")
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(au.Spec, &merged); err != nil {
		return fmt.Errorf("automation %s: stored record: %w", au.ID, err)
	}
	merged["enabled"], _ = json.Marshal(au.Enabled)
	for k, v := range body {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(merged, k)
			continue
		}
		merged[k] = v
	}
	raw, _ := json.Marshal(merged) // a decoded object marshals
	rec, err := automations.Decode(raw)
	if err != nil {
		return fieldErrors(err)
	}
	// An at that already fired is in the past: only a trigger sent now must be in the future.
	now := a.now()
	validAt := au.CreatedAt
	if _, ok := body["trigger"]; ok {
		validAt = now
	}
	if err := automations.Validate(rec, a.ag, validAt); err != nil {
		return fieldErrors(err)
	}
	if rec.Trigger.Event != specHasEvent(au.Spec) {
		return invalid("trigger", "an automation cannot become or stop being an event trigger (its secret is made at creation); create a new one")
	}
	enabled := rec.IsEnabled()
	rec.Enabled = nil
	spec, _ := json.Marshal(rec) // a decoded record marshals
	upd := registry.AutomationUpdate{Name: &rec.Name, Spec: spec}
	if _, ok := body["enabled"]; ok || enabled != au.Enabled {
		upd.Enabled = &enabled
	}
	saved, err := a.host.Store.Update(r.Context(), a.agentID, au.ID, upd)
	if err != nil {
		return err
	}
	// A schedule counts from now on: fires missed while paused are not caught up.
	return a.answerScheduled(w, r, saved, rec, now, http.StatusOK, "")
}

func specHasEvent(spec json.RawMessage) bool {
	rec, err := automations.Decode(spec)
	return err == nil && rec.Trigger.Event
}

// remove serves DELETE /api/automations/{id}: the automation with its runs' records (their
// sessions stay).
func (a *automationRoutes) remove(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	au, err := a.mine(r, who)
	if err != nil {
		return err
	}
	if err := a.host.Store.Delete(r.Context(), a.agentID, au.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// fireView is a fire as /run and /runs answer it.
type fireView struct {
	FireTime   time.Time  `json:"fire_time"`
	FiredAt    time.Time  `json:"fired_at"`
	Status     string     `json:"status"`
	SessionID  string     `json:"session_id,omitempty"`
	DoneReason string     `json:"done_reason,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
}

func fireViewOf(f registry.AutomationFire) fireView {
	return fireView{FireTime: f.FireTime, FiredAt: f.FiredAt, Status: string(f.Status), SessionID: f.SessionID,
		DoneReason: f.DoneReason, Error: f.Error, StartedAt: f.StartedAt, EndedAt: f.EndedAt}
}

// run serves POST /api/automations/{id}/run, the operator's button: a fire now, through the
// queue, whether or not the automation is paused. 202 with the fire.
func (a *automationRoutes) run(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	au, err := a.mine(r, who)
	if err != nil {
		return err
	}
	f, err := a.fire(r.Context(), au.ID, TriggerRun, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, fireViewOf(f))
	return nil
}

// fire records a fire of automation id now and enqueues its run. Two fires within one
// microsecond get distinct fire times.
func (a *automationRoutes) fire(ctx context.Context, id, trigger string, event json.RawMessage) (registry.AutomationFire, error) {
	at := a.now().UTC().Truncate(time.Microsecond)
	for range 100 {
		ok, err := a.host.Store.RecordFire(ctx, id, at, trigger, event)
		if err != nil {
			return registry.AutomationFire{}, err
		}
		if ok {
			break
		}
		at = at.Add(time.Microsecond)
	}
	if err := a.host.Fire(ctx, AutomationFire{AutomationID: id, FireTime: at, Trigger: trigger}); err != nil {
		// The fire stays queued, with its event: the scheduler enqueues again a fire whose task
		// was lost.
		return registry.AutomationFire{}, fmt.Errorf("enqueue the fire of automation %s: %w", id, err)
	}
	return a.host.Store.GetFire(ctx, id, at)
}

// runs serves GET /api/automations/{id}/runs: its fires, newest first, each with its session.
func (a *automationRoutes) runs(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	au, err := a.mine(r, who)
	if err != nil {
		return err
	}
	q, err := pageQuery(r)
	if err != nil {
		return err
	}
	fires, next, err := a.host.Store.ListFires(r.Context(), au.ID, registry.FireQuery{Limit: q.limit, Before: q.before})
	if errors.Is(err, registry.ErrBadCursor) {
		return invalid("cursor", "is not a cursor of this list")
	}
	if err != nil {
		return err
	}
	out := make([]fireView, 0, len(fires))
	for _, f := range fires {
		out = append(out, fireViewOf(f))
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out, "next_cursor": cursorText(next)})
	return nil
}

// event serves POST /api/automations/{id}/events: no bearer credential, the signature is the
// credential (X-Svc-Signature over "<X-Svc-Timestamp>.<body>", the timestamp within 5
// minutes). A bad or stale signature, or an automation of another agent or without an event
// trigger, is 401 and records nothing; a replayed X-Svc-Event-Id is 200 {"duplicate": true};
// else 202 with the fire, run through the queue with the body as its event.
func (a *automationRoutes) event(w http.ResponseWriter, r *http.Request) error {
	if a.host == nil {
		return errNoAutomations
	}
	if r.ContentLength > MaxEventBytes {
		return &APIError{Code: CodeTooLarge, Message: fmt.Sprintf("an event body is at most %d bytes", MaxEventBytes)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEventBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &APIError{Code: CodeTooLarge, Message: fmt.Sprintf("an event body is at most %d bytes", MaxEventBytes)}
		}
		return invalid("body", "cannot read the request body: %v", err)
	}
	unauthorized := func(why string) error {
		return &APIError{Code: CodeUnauthenticated, Message: why}
	}
	id := r.PathValue("id")
	au, err := a.host.Store.Get(r.Context(), a.agentID, id)
	if errors.Is(err, registry.ErrAutomationNotFound) {
		return unauthorized("no event trigger " + strconv.Quote(id) + " on this agent")
	}
	if err != nil {
		return err
	}
	secret, err := a.host.Store.EventSecret(r.Context(), au.ID)
	if err != nil {
		return err
	}
	if secret == "" {
		return unauthorized("automation " + strconv.Quote(id) + " has no event trigger")
	}
	if err := automations.VerifyEvent(secret, r.Header.Get(automations.SignatureHeader), r.Header.Get(automations.TimestampHeader), body, a.now()); err != nil {
		return unauthorized(strings.TrimPrefix(err.Error(), "automations: ") + "; sign \"<X-Svc-Timestamp>.<body>\" with the secret shown when the automation was created")
	}
	if !json.Valid(body) {
		return invalid("body", "an event body must be JSON")
	}
	if !au.Enabled {
		return &APIError{Code: CodeConflict, Message: "automation " + strconv.Quote(id) + " is paused" + reasonSuffix(au.DisabledReason) + "; resume it with PATCH {\"enabled\": true}"}
	}
	if eventID := r.Header.Get(automations.EventIDHeader); eventID != "" {
		if len(eventID) > 200 {
			return invalid(automations.EventIDHeader, "is at most 200 bytes")
		}
		dup, err := a.host.Store.SeenEvent(r.Context(), au.ID, "event:"+eventID)
		if err != nil {
			return err
		}
		if dup {
			writeJSON(w, http.StatusOK, map[string]any{"duplicate": true})
			return nil
		}
	}
	f, err := a.fire(r.Context(), au.ID, TriggerEvent, body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, fireViewOf(f))
	return nil
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// storeWritten runs the store triggers that a write of rec to store matches: each once per
// written version (replays of the same version are refused by the version's event id). It
// never fails the write: a trigger that cannot be fired is logged.
func (a *automationRoutes) storeWritten(ctx context.Context, store string, rec stores.Record) {
	if a.host == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	list, err := a.host.Store.Triggered(ctx, a.agentID)
	if err != nil {
		a.log.Warn("store trigger: list automations", "store", store, "err", err)
		return
	}
	var fields map[string]any
	for _, au := range list {
		spec, err := automations.Decode(au.Spec)
		if err != nil || spec.Trigger.Store != store {
			continue
		}
		if fields == nil {
			if err := json.Unmarshal(rec.Value, &fields); err != nil {
				a.log.Warn("store trigger: read the record", "store", store, "key", rec.Key, "err", err)
				return
			}
		}
		if !matches(fields, spec.Trigger.Where) {
			continue
		}
		dup, err := a.host.Store.SeenEvent(ctx, au.ID, fmt.Sprintf("store:%s:%s:%d", store, rec.Key, rec.Version))
		if err != nil || dup {
			if err != nil {
				a.log.Warn("store trigger: record the version", "automation_id", au.ID, "err", err)
			}
			continue
		}
		record, _ := json.Marshal(map[string]any{"store": store, "key": rec.Key, "version": rec.Version, "fields": json.RawMessage(rec.Value)})
		if _, err := a.fire(ctx, au.ID, TriggerStore, record); err != nil {
			a.log.Warn("store trigger: fire", "automation_id", au.ID, "err", err)
		}
	}
}

// matches reports whether fields has every where value (a nil value: the field absent or null).
func matches(fields, where map[string]any) bool {
	for k, want := range where {
		if !reflect.DeepEqual(fields[k], want) {
			return false
		}
	}
	return true
}

// AutomationRun is one fire of an automation for RunAutomation.
type AutomationRun struct {
	AutomationID string
	Name         string
	Spec         *automations.Automation
	Saver        registry.AutomationSaver
	// Trigger is the fire's trigger (TriggerSchedule, ...); Event its event body or written
	// record, nil for the others.
	Trigger string
	Event   json.RawMessage
	// Started, when set, is told the run's session id once its turn has begun.
	Started func(sessionID string)
}

// AutomationResult is how a run ended: its session, the done frame's reason, and the last
// error frame's message when it ended in error.
type AutomationResult struct {
	SessionID  string
	DoneReason string
	Error      string
}

// RunAutomation runs one fire as its saver (CONTRACT §9): a new session owned by the saver's
// user, in the saver's scope, titled with the automation's name and with metadata
// automation_id. A message action is a turn on the session's model with the event or record
// appended; a tool action is a call of the tool (params, with params.event or params.record)
// through the turn without a model, with its approvals and durable runs like any call. The run
// is a trace whose root span carries svc.automation.id. An error is a run that could not start.
func (rt *Runtime) RunAutomation(ctx context.Context, run AutomationRun) (AutomationResult, error) {
	if tr := rt.opts.Tracer; tr != nil {
		var span trace.Span
		ctx, span = tr.Start(ctx, "svc.automation.run", trace.WithNewRoot(), trace.WithAttributes(
			attribute.String("svc.automation.id", run.AutomationID), attribute.String("svc.automation.trigger", run.Trigger)))
		defer span.End()
	}
	spec := run.Spec
	who := access.Identity{UserID: run.Saver.UserID, Scope: run.Saver.ScopeID, Method: access.Method(run.Saver.CredentialKind),
		CredentialID: run.Saver.CredentialID, Email: run.Saver.Email, EmailVerified: run.Saver.EmailVerified, OrgID: run.Saver.OrgID, Groups: run.Saver.Groups}
	st := turn.Start{Caller: who, New: turn.Settings{ScopeID: run.Saver.ScopeID, Agent: spec.Action.Agent, Skill: spec.Action.Skill, Title: run.Name},
		Metadata: map[string]string{"automation_id": run.AutomationID}, Context: contextStrings(spec.Context)}
	if spec.Action.Tool != "" {
		params := maps.Clone(spec.Action.Params)
		if params == nil {
			params = map[string]any{}
		}
		if run.Event != nil {
			params[eventParam(run.Trigger)] = json.RawMessage(run.Event)
		}
		args, err := json.Marshal(params)
		if err != nil {
			return AutomationResult{}, fmt.Errorf("automation %s: action.params: %w", run.AutomationID, err)
		}
		st.Text = "Automation " + strconv.Quote(run.Name) + " calls " + spec.Action.Tool
		st.Provider = models.Scripted{Tool: spec.Action.Tool, Arguments: args}
	} else {
		st.Text = spec.Action.Message
		if run.Event != nil {
			st.Text += "\n\n" + eventParam(run.Trigger) + ":\n" + string(run.Event)
		}
	}
	t, err := rt.turns.Open(ctx, st)
	if err != nil {
		return AutomationResult{}, err
	}
	res := AutomationResult{SessionID: t.SessionID()}
	if run.Started != nil {
		run.Started(res.SessionID)
	}
	sink := &runSink{}
	done := t.Run(ctx, sink)
	res.DoneReason, res.Error = string(done.Reason), sink.lastError
	if res.Error == "" && done.Reason == loop.ReasonError && done.Err != nil {
		res.Error = done.Err.Error()
	}
	return res, nil
}

// eventParam is the params member (and message heading) of a fire's event: record for a
// store write, event otherwise.
func eventParam(trigger string) string {
	if trigger == TriggerStore {
		return "record"
	}
	return "event"
}

// contextStrings is an automation's context as a session's: strings as they are, other values
// as JSON.
func contextStrings(c map[string]any) map[string]string {
	if c == nil {
		return nil
	}
	out := make(map[string]string, len(c))
	for k, v := range c {
		if s, ok := v.(string); ok {
			out[k] = s
			continue
		}
		b, _ := json.Marshal(v) // decoded JSON marshals
		out[k] = string(b)
	}
	return out
}

// runSink keeps the last error frame's message of an automation's turn.
type runSink struct{ lastError string }

// Emit implements loop.Sink.
func (s *runSink) Emit(f *sse.Frame) error {
	if f.Type == sse.TypeError {
		s.lastError = f.Message
	}
	return nil
}
