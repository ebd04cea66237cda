package stores

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/tools"
)

// Store tool actions (agent.StoreActions).
const (
	ActionGet     = "get"
	ActionSet     = "set"
	ActionQuery   = "query"
	ActionDelete  = "delete"
	ActionHistory = "history"
)

// Actions returns the actions an access mode offers: agent.ModeRead ("r") get, query and
// history; agent.ModeReadWrite ("rw") all five; none for another mode.
func Actions(mode string) []string {
	switch mode {
	case agent.ModeRead:
		return []string{ActionGet, ActionQuery, ActionHistory}
	case agent.ModeReadWrite:
		return agent.StoreActions()
	}
	return nil
}

// Tools returns the store tools of access (store name → access mode, as in
// agent.NamedAgent.Stores), by store name and then in the order of agent.StoreActions. Stores
// r does not define and unknown modes give no tool (the build refuses both).
func Tools(r *Records, access map[string]string) []tools.Tool {
	var out []tools.Tool
	for _, store := range sortedKeys(access) {
		e, ok := r.entities[store]
		if !ok {
			continue
		}
		for _, action := range agent.StoreActions() {
			if slices.Contains(Actions(access[store]), action) {
				out = append(out, newTool(r, e, action))
			}
		}
	}
	return out
}

// NewTool returns the tool of one action on one store, for a runtime that offers only the
// store tools an agent lists by name (agent.ParseStoreToolName splits such a name). Access
// modes are the caller's to check (Actions).
func NewTool(r *Records, store, action string) (tools.Tool, error) {
	e, ok := r.entities[store]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownStore, store)
	}
	if !slices.Contains(agent.StoreActions(), action) {
		return nil, fmt.Errorf("stores: unknown store action %q (known: %s)", action, strings.Join(agent.StoreActions(), ", "))
	}
	return newTool(r, e, action), nil
}

// storeTool is the tool store__<store>__<action>. Its results are the shapes of the contract
// (docs: CONTRACT §7), as Data and as the same JSON text in Content. Input the model can
// correct is an error result (IsError) naming the field, and so is a database of the agent's
// own that is unavailable (ErrUnavailable: its url not set); another failure of the backend is
// an error.
type storeTool struct {
	recs   *Records
	e      *entity
	action string
	spec   models.ToolSpec
}

var (
	_ tools.Tool    = (*storeTool)(nil)
	_ tools.Labeler = (*storeTool)(nil)
)

func newTool(r *Records, e *entity, action string) *storeTool {
	return &storeTool{recs: r, e: e, action: action, spec: models.ToolSpec{
		Name:        agent.StoreToolName(e.store, action),
		Description: toolDescription(e, action),
		Parameters:  toolParameters(e, action),
	}}
}

// Spec implements tools.Tool.
func (t *storeTool) Spec() models.ToolSpec { return t.spec }

// Labels implements tools.Labeler.
func (t *storeTool) Labels(args json.RawMessage) (running, completed string) {
	var verbs [2]string
	switch t.action {
	case ActionGet:
		verbs = [2]string{"Reading", "Read"}
	case ActionSet:
		verbs = [2]string{"Saving to", "Saved to"}
	case ActionQuery:
		verbs = [2]string{"Searching", "Searched"}
	case ActionDelete:
		verbs = [2]string{"Deleting from", "Deleted from"}
	case ActionHistory:
		verbs = [2]string{"Reading the history of", "Read the history of"}
	}
	what := " " + t.e.store
	var a struct {
		Key string `json:"key"`
	}
	if t.action != ActionSet && t.action != ActionQuery && json.Unmarshal(args, &a) == nil && a.Key != "" && len(a.Key) <= 64 {
		what += " " + a.Key
	}
	return verbs[0] + what, verbs[1] + what
}

// Item is a record as the store tools (and the store routes) show it: the contract's
// {key, version, value}.
type Item struct {
	Key     string          `json:"key"`
	Version int64           `json:"version"`
	Value   json.RawMessage `json:"value"`
}

// ItemOf returns the Item of rec.
func ItemOf(rec Record) Item { return Item{Key: rec.Key, Version: rec.Version, Value: rec.Value} }

// Items returns the Items of recs, never nil (so that JSON shows an empty list as []).
func Items(recs []Record) []Item {
	out := make([]Item, len(recs))
	for i, rec := range recs {
		out[i] = ItemOf(rec)
	}
	return out
}

// Output shapes of the store tools besides Item.
type (
	notFoundOut struct {
		Key   string `json:"key"`
		Found bool   `json:"found"`
	}
	itemsOut struct {
		Items []Item `json:"items"`
	}
	deletedOut struct {
		Key     string `json:"key"`
		Deleted bool   `json:"deleted"`
	}
)

// History is a key's versions as the history tool (and the history route) shows them, newest
// first.
type History struct {
	Key      string    `json:"key"`
	Versions []Version `json:"versions"`
}

// Version is one version of a History: with its trace on a store with "trace": true, when a
// model's tool call (or a handler's child call) wrote it.
type Version struct {
	Version   int64           `json:"version"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"` // RFC 3339, UTC
	Trace     *TraceOut       `json:"trace,omitempty"`
}

// TraceOut is a version's trace as shown: who wrote it, and when (the version's updated_at).
type TraceOut struct {
	SessionID  string `json:"session_id,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	At         string `json:"at"` // RFC 3339, UTC
}

// HistoryOf returns the History of key's versions recs, never with a nil list.
func HistoryOf(key string, recs []Record) History {
	out := History{Key: key, Versions: make([]Version, len(recs))}
	for i, rec := range recs {
		at := rec.UpdatedAt.UTC().Format(time.RFC3339Nano)
		out.Versions[i] = Version{Version: rec.Version, Value: rec.Value, UpdatedAt: at}
		if tr := rec.Trace; tr != nil {
			out.Versions[i].Trace = &TraceOut{SessionID: tr.SessionID, ToolCallID: tr.ToolCallID, At: at}
		}
	}
	return out
}

// Call implements tools.Tool. A write records call.Session.ID and call.ID as
// its trace, on stores with "trace": true.
func (t *storeTool) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	out, err := t.run(ctx, call)
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) {
		// The model can correct its input; an unavailable database (a url not set yet) says
		// why and how to set it, for whoever reads the stream.
		return tools.Result{Content: err.Error(), IsError: true}, nil
	}
	if err != nil {
		return tools.Result{}, fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	data, err := encodeJSON(out)
	if err != nil {
		return tools.Result{}, fmt.Errorf("%s: encode result: %w", t.spec.Name, err)
	}
	return tools.Result{Content: string(data), Data: data}, nil
}

func (t *storeTool) run(ctx context.Context, call tools.Call) (any, error) {
	store := t.e.store
	switch t.action {
	case ActionSet:
		rec, err := t.recs.Set(ctx, store, call.Arguments, Trace{SessionID: call.Session.ID, ToolCallID: call.ID})
		if err != nil {
			return nil, err
		}
		return ItemOf(rec), nil
	case ActionQuery:
		q, err := t.queryArgs(call.Arguments)
		if err != nil {
			return nil, err
		}
		recs, err := t.recs.Query(ctx, store, q)
		if err != nil {
			return nil, err
		}
		return itemsOut{Items: Items(recs)}, nil
	}
	key, err := t.keyArg(call.Arguments)
	if err != nil {
		return nil, err
	}
	switch t.action {
	case ActionGet:
		rec, err := t.recs.Get(ctx, store, key)
		if errors.Is(err, ErrNotFound) {
			return notFoundOut{Key: key}, nil
		}
		if err != nil {
			return nil, err
		}
		return ItemOf(rec), nil
	case ActionDelete:
		deleted, err := t.recs.Delete(ctx, store, key)
		if err != nil {
			return nil, err
		}
		return deletedOut{Key: key, Deleted: deleted}, nil
	case ActionHistory:
		recs, err := t.recs.History(ctx, store, key)
		if err != nil {
			return nil, err
		}
		return HistoryOf(key, recs), nil
	}
	return nil, fmt.Errorf("unknown action %q", t.action)
}

// args decodes the argument object of a call (empty means {}) and refuses names other than
// allowed.
func (t *storeTool) args(raw json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return nil, fieldErr("", "the arguments must be a JSON object with %s", strings.Join(allowed, " and "))
		}
	}
	var errs []error
	for _, name := range sortedKeys(args) {
		if !slices.Contains(allowed, name) {
			errs = append(errs, fieldErr(name, "unknown argument; %s takes %s", t.spec.Name, strings.Join(allowed, " and ")))
		}
	}
	return args, errors.Join(errs...)
}

// keyArg reads {key}.
func (t *storeTool) keyArg(raw json.RawMessage) (string, error) {
	args, err := t.args(raw, "key")
	if err != nil {
		return "", err
	}
	v, ok := args["key"]
	if !ok {
		return "", fieldErr("key", "missing; it is %s filled in with the record's fields", t.e.def.Entity.Key)
	}
	var key string
	if err := json.Unmarshal(v, &key); err != nil {
		return "", fieldErr("key", "must be a string, got %s", v)
	}
	return key, nil
}

// queryArgs reads {where?, limit?}.
func (t *storeTool) queryArgs(raw json.RawMessage) (Query, error) {
	var q Query
	args, err := t.args(raw, "where", "limit")
	if err != nil {
		return q, err
	}
	if v, ok := args["where"]; ok && string(v) != "null" {
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&q.Where); err != nil || q.Where == nil {
			return q, fieldErr("where", "must be an object of field names and values, got %s", v)
		}
	}
	if v, ok := args["limit"]; ok && string(v) != "null" {
		n, err := strconv.ParseFloat(string(v), 64)
		if err != nil || n != math.Trunc(n) || n < 1 || n > MaxLimit {
			return q, fieldErr("limit", "must be an integer between 1 and %d, got %s", MaxLimit, v)
		}
		q.Limit = int(n)
	}
	return q, nil
}
