package automations

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"svc/agent"
)

// maxNameLen bounds an automation's name (it becomes its runs' session title).
const maxNameLen = 200

// Validate checks a against the agent it runs on (ag may be nil to skip the name checks) at now,
// and returns every problem joined (errors.Join), each a *FieldError naming its field:
// exactly one trigger kind and one action kind; a cron that robfig/cron's standard parser reads
// and that fires again; an IANA timezone; an every of at least 1m; an at in the future; an
// event trigger written as true; a store that exists with where fields of its schema; a tool,
// agent or skill the agent has; an overlap of skip, queue or allow; a catchup of at most 24h.
func Validate(a *Automation, ag *agent.Agent, now time.Time) error {
	var errs []error
	add := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	switch name := strings.TrimSpace(a.Name); {
	case name == "":
		add(fieldErr("name", "is required"))
	case len(a.Name) > maxNameLen:
		add(fieldErr("name", "is %d bytes, over the limit of %d", len(a.Name), maxNameLen))
	}
	add(validateTrigger(&a.Trigger, ag, now))
	add(validateAction(&a.Action, ag))
	switch a.Overlap {
	case "", OverlapSkip, OverlapQueue, OverlapAllow:
	default:
		add(fieldErr("overlap", "%q is not one of skip, queue, allow", a.Overlap))
	}
	if a.Catchup != "" {
		d, err := time.ParseDuration(a.Catchup)
		switch {
		case err != nil:
			add(fieldErr("catchup", "%q is not a duration such as \"1h\"", a.Catchup))
		case d < 0:
			add(fieldErr("catchup", "%q is negative", a.Catchup))
		case d > MaxCatchup:
			add(fieldErr("catchup", "%q is over the maximum of 24h", a.Catchup))
		}
	}
	return errors.Join(errs...)
}

func validateTrigger(t *Trigger, ag *agent.Agent, now time.Time) error {
	var kinds []string
	for _, k := range []struct {
		name string
		set  bool
	}{{"cron", t.Cron != ""}, {"every", t.Every != ""}, {"at", t.At != ""}, {"event", t.Event}, {"store", t.Store != ""}} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	var errs []error
	switch len(kinds) {
	case 0:
		return fieldErr("trigger", "set exactly one of cron, every, at, event or store")
	case 1:
	default:
		return fieldErr("trigger", "has %s: set exactly one of cron, every, at, event or store", strings.Join(kinds, " and "))
	}
	if t.Timezone != "" && t.Cron == "" {
		errs = append(errs, fieldErr("trigger.timezone", "is only for a cron trigger"))
	}
	if t.Where != nil && t.Store == "" {
		errs = append(errs, fieldErr("trigger.where", "is only for a store trigger"))
	}
	switch kinds[0] {
	case "cron":
		s, err := ParseCron(t.Cron, t.Timezone)
		if err != nil {
			errs = append(errs, err)
		} else if _, ok := s.Next(now); !ok {
			errs = append(errs, fieldErr("trigger.cron", "%q never fires", t.Cron))
		}
	case "every":
		if _, err := ParseEvery(t.Every, now); err != nil {
			errs = append(errs, err)
		}
	case "at":
		s, err := ParseAt(t.At)
		if err != nil {
			errs = append(errs, err)
		} else if !s.At.After(now) {
			errs = append(errs, fieldErr("trigger.at", "%s is in the past", t.At))
		}
	case "store":
		errs = append(errs, validateStore(t, ag))
	}
	return errors.Join(errs...)
}

func validateStore(t *Trigger, ag *agent.Agent) error {
	if ag == nil {
		return nil
	}
	st := ag.Stores[t.Store]
	if st == nil {
		return fieldErr("trigger.store", "unknown store %q (the agent has: %s)", t.Store, list(keys(ag.Stores)))
	}
	var errs []error
	for _, f := range keys(t.Where) {
		if _, ok := st.Entity.Schema[f]; !ok {
			errs = append(errs, fieldErr("trigger.where."+f, "store %q has no field %q", t.Store, f))
			continue
		}
		switch t.Where[f].(type) {
		case string, float64, bool, nil:
		default:
			errs = append(errs, fieldErr("trigger.where."+f, "must be a string, number, boolean or null"))
		}
	}
	return errors.Join(errs...)
}

func validateAction(act *Action, ag *agent.Agent) error {
	hasMessage, hasTool := act.Message != "", act.Tool != ""
	switch {
	case hasMessage && hasTool:
		return fieldErr("action", "has message and tool: set exactly one")
	case !hasMessage && !hasTool:
		return fieldErr("action", "set exactly one of message and tool")
	}
	var errs []error
	if hasTool {
		if act.Agent != "" {
			errs = append(errs, fieldErr("action.agent", "is only for a message action"))
		}
		if act.Skill != "" {
			errs = append(errs, fieldErr("action.skill", "is only for a message action"))
		}
		if ag != nil && !knownTool(ag, act.Tool) {
			errs = append(errs, fieldErr("action.tool", "unknown tool %q: not a folder under svc/tools or a store__<store>__<action> tool", act.Tool))
		}
		return errors.Join(errs...)
	}
	if act.Params != nil {
		errs = append(errs, fieldErr("action.params", "is only for a tool action"))
	}
	if ag == nil {
		return errors.Join(errs...)
	}
	if act.Agent != "" && ag.Agents[act.Agent] == nil {
		errs = append(errs, fieldErr("action.agent", "unknown agent %q (the agent has: %s)", act.Agent, list(keys(ag.Agents))))
	}
	if act.Skill != "" && ag.Skills[act.Skill] == nil {
		errs = append(errs, fieldErr("action.skill", "unknown skill %q (the agent has: %s)", act.Skill, list(keys(ag.Skills))))
	}
	return errors.Join(errs...)
}

// knownTool reports whether name is a tool an automation may call directly: a folder under
// svc/tools or a generated store tool of one of the agent's stores. The model-facing built-ins
// (load_skill, ask_user, …) need a model turn and are not entry points.
func knownTool(ag *agent.Agent, name string) bool {
	if ag.Tools[name] != nil {
		return true
	}
	for store := range ag.Stores {
		if slices.Contains(storeTools(store), name) {
			return true
		}
	}
	return false
}

func storeTools(store string) []string {
	var names []string
	for _, action := range agent.StoreActions() {
		names = append(names, agent.StoreToolName(store, action))
	}
	return names
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
