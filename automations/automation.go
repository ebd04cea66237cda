package automations

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Overlap is what happens to a fire while the previous run of the same automation is running.
type Overlap string

// The overlap policies.
const (
	OverlapSkip  Overlap = "skip"  // the fire is dropped (the default)
	OverlapQueue Overlap = "queue" // the fire waits until the previous run ends
	OverlapAllow Overlap = "allow" // the fire runs alongside
)

// Defaults of the optional fields, applied by Decode and ApplyDefaults.
const (
	DefaultEnvironment = "production"
	DefaultTimezone    = "UTC"
	DefaultCatchup     = time.Hour
	// MaxCatchup bounds the catchup window.
	MaxCatchup = 24 * time.Hour
	// MinEvery is the shortest every interval.
	MinEvery = time.Minute
)

// Automation is the record of CONTRACT §9 as a caller writes it. Server-held fields (id, owner
// scope, secret, disabled_reason) live with whoever stores it; Created is the one this package
// reads: the fixed anchor `every` counts from.
type Automation struct {
	Name        string         `json:"name"`
	Trigger     Trigger        `json:"trigger"`
	Action      Action         `json:"action"`
	Environment string         `json:"environment,omitempty"`
	Context     map[string]any `json:"context,omitempty"`
	// Enabled is nil when not written; ApplyDefaults makes it true.
	Enabled *bool   `json:"enabled,omitempty"`
	Overlap Overlap `json:"overlap,omitempty"`
	// Catchup is a Go duration ("1h", "90m"), at most 24h.
	Catchup string `json:"catchup,omitempty"`
	// Created is the anchor of an every trigger (the record's creation time); not part of the JSON.
	Created time.Time `json:"-"`
}

// Trigger is when an automation fires: exactly one of cron (with timezone), every, at, event and
// store (with where) is set.
type Trigger struct {
	Cron     string         `json:"cron,omitempty"`
	Timezone string         `json:"timezone,omitempty"` // IANA name, with cron only; default UTC
	Every    string         `json:"every,omitempty"`    // Go duration, at least 1m
	At       string         `json:"at,omitempty"`       // RFC 3339
	Event    bool           `json:"event,omitempty"`
	Store    string         `json:"store,omitempty"`
	Where    map[string]any `json:"where,omitempty"` // with store only: field → value
}

// Action is what a fire does: exactly one of message (optionally to a named agent with a skill)
// and tool (with params).
type Action struct {
	Message string         `json:"message,omitempty"`
	Agent   string         `json:"agent,omitempty"`
	Skill   string         `json:"skill,omitempty"`
	Tool    string         `json:"tool,omitempty"`
	Params  map[string]any `json:"params,omitempty"`
}

// ErrInvalid is matched (errors.Is) by every *FieldError.
var ErrInvalid = errors.New("automations: invalid automation")

// FieldError is one bad input, named by its JSON path ("trigger.cron").
type FieldError struct {
	Field   string
	Message string
}

// Error implements error: "<field>: <message>".
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// The JSON members each object of the record may have.
var (
	automationKeys = []string{"name", "trigger", "action", "environment", "context", "enabled", "overlap", "catchup"}
	triggerKeys    = []string{"cron", "timezone", "every", "at", "event", "store", "where"}
	actionKeys     = []string{"message", "agent", "skill", "tool", "params"}
)

// Decode reads one automation from data strictly: an unknown member is a *FieldError naming its
// path ("trigger.foo"), as is a wrong type; data after the object is an error. Defaults are
// applied. The members of context, where and params are free-form.
func Decode(data []byte) (*Automation, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("automation: %w", err)
	}
	if top == nil {
		return nil, fieldErr("automation", "must be a JSON object")
	}
	if err := checkKeys("", top, automationKeys); err != nil {
		return nil, err
	}
	for name, keys := range map[string][]string{"trigger": triggerKeys, "action": actionKeys} {
		raw, ok := top[name]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return nil, fieldErr(name, "must be a JSON object")
		}
		if err := checkKeys(name+".", members, keys); err != nil {
			return nil, err
		}
	}
	var a Automation
	if err := json.Unmarshal(data, &a); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fieldErr(te.Field, "must be %s, not %s", jsonType(te.Type.Kind().String()), te.Value)
		}
		return nil, fmt.Errorf("automation: %w", err)
	}
	a.ApplyDefaults()
	return &a, nil
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "map", "struct":
		return "an object"
	default:
		return "a " + kind
	}
}

func checkKeys(prefix string, members map[string]json.RawMessage, allowed []string) error {
	names := make([]string, 0, len(members))
	for k := range members {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(allowed, k) {
			return fieldErr(prefix+k, "unknown field (known: %v)", allowed)
		}
	}
	return nil
}

// ApplyDefaults fills the optional fields left out: environment production, enabled true,
// overlap skip, catchup 1h, and timezone UTC for a cron trigger.
func (a *Automation) ApplyDefaults() {
	if a.Environment == "" {
		a.Environment = DefaultEnvironment
	}
	if a.Enabled == nil {
		enabled := true
		a.Enabled = &enabled
	}
	if a.Overlap == "" {
		a.Overlap = OverlapSkip
	}
	if a.Catchup == "" {
		a.Catchup = DefaultCatchup.String()
	}
	if a.Trigger.Cron != "" && a.Trigger.Timezone == "" {
		a.Trigger.Timezone = DefaultTimezone
	}
}

// IsEnabled reports whether a fires: Enabled true or left out.
func (a *Automation) IsEnabled() bool { return a.Enabled == nil || *a.Enabled }

// CatchupWindow is a's catchup as a duration: the default (1h) when left out or unparsable,
// capped at MaxCatchup. Validate reports a bad value; this never fails.
func (a *Automation) CatchupWindow() time.Duration {
	if a.Catchup == "" {
		return DefaultCatchup
	}
	d, err := time.ParseDuration(a.Catchup)
	switch {
	case err != nil || d < 0:
		return DefaultCatchup
	case d > MaxCatchup:
		return MaxCatchup
	}
	return d
}
