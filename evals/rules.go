package evals

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"svc/agent"
)

// Names of the runtime's tools the rules look for (runner/tools and runner/connections; a test
// keeps them equal).
const (
	toolLoadSkill     = "load_skill"
	toolLoadKnowledge = "load_knowledge"
	toolRequest       = "request"
)

// namePattern is the pattern of a tool, store, connection, skill or document name, bare or in quotes.
const namePattern = "[`\"']?([a-z0-9][a-z0-9_.:/-]*)[`\"']?"

// rule is one recognised assertion phrase. re matches the assertion's text lower-cased, after
// its "should"/"should not" prefix and a final period; its first group is the name. check
// reports whether the transcript shows the thing, with the evidence.
type rule struct {
	re    *regexp.Regexp
	check func(t *turn, name string) (bool, string)
}

// rules are tried in order; the first whose pattern matches judges the assertion. Skill and
// knowledge phrases come before the general "use"/"read" ones.
var rules = []rule{
	{regexp.MustCompile(`^(?:load|activate|use) (?:the )?` + namePattern + ` skill$`), loadsSkill},
	{regexp.MustCompile(`^(?:load|activate) (?:the )?skill ` + namePattern + `$`), loadsSkill},
	{regexp.MustCompile(`^(?:load|read|consult|use) (?:the )?` + namePattern + ` knowledge(?: document| doc)?$`), loadsKnowledge},
	{regexp.MustCompile(`^(?:load|read|consult) (?:the )?knowledge(?: document| doc)? ` + namePattern + `$`), loadsKnowledge},
	{regexp.MustCompile(`^(?:call|use|invoke) (?:the )?` + namePattern + ` (?:tool|connection|store)$`), callsTool},
	{regexp.MustCompile(`^(?:call|invoke) (?:the )?(?:tool|connection) ` + namePattern + `$`), callsTool},
	{regexp.MustCompile(`^(?:call|invoke) ` + namePattern + `$`), callsTool},
	{regexp.MustCompile("^use (?:the )?[`\"']([a-z0-9][a-z0-9_.:/-]*)[`\"']$"), callsTool},
	{regexp.MustCompile(`^use ([a-z0-9][a-z0-9.:/-]*_[a-z0-9_.:/-]*)$`), callsTool},
	{regexp.MustCompile(`^(?:read|fetch|query) (?:from )?(?:the )?` + namePattern + `(?: store| connection| api)?$`), readsFrom},
	{regexp.MustCompile(`^(?:write|save|record) (?:to|in|into) (?:the )?` + namePattern + `(?: store| connection| api)?$`), writesTo},
	{regexp.MustCompile(`^(?:write|update) (?:the )?` + namePattern + ` store$`), writesTo},
	{regexp.MustCompile(`^(?:end|finish|stop) with (?:the )?(?:reason )?` + `[` + "`" + `"']?([a-z_ ]+?)[` + "`" + `"']?(?: reason)?$`), endsWith},
}

// ruleVerdict judges a by the rules. ok is false when no rule recognises its text.
func ruleVerdict(a agent.Assertion, t *turn) (pass bool, reason string, ok bool) {
	text := strings.ToLower(strings.TrimSpace(a.Text))
	text = strings.TrimSpace(strings.TrimRight(text, ".!"))
	text = strings.Join(strings.Fields(text), " ")
	negative := a.Negative
	rest := ""
	for _, p := range [...]struct {
		prefix   string
		negative bool
	}{
		{"should not ", true}, {"should never ", true}, {"must not ", true}, {"must never ", true},
		{"should ", false}, {"must ", false},
	} {
		if r, found := strings.CutPrefix(text, p.prefix); found {
			rest, negative = r, negative || p.negative
			break
		}
	}
	if rest == "" {
		return false, "", false
	}
	for _, r := range rules {
		m := r.re.FindStringSubmatch(rest)
		if m == nil {
			continue
		}
		holds, evidence := r.check(t, m[1])
		return holds != negative, evidence, true
	}
	return false, "", false
}

// sameStore reports whether a store tool's store part names the store s (hyphens become
// underscores in tool names).
func sameStore(toolStore, s string) bool {
	return strings.EqualFold(toolStore, strings.ReplaceAll(s, "-", "_"))
}

// callsTool: a call of a tool named n, of a store tool of store n, or of the request tool with
// connection n.
func callsTool(t *turn, n string) (bool, string) {
	for _, c := range t.ToolCalls {
		if strings.EqualFold(c.Name, n) {
			return true, "called " + describe(c)
		}
		if s, _, ok := agent.ParseStoreToolName(c.Name); ok && sameStore(s, n) {
			return true, "called " + describe(c)
		}
		if c.Name == toolRequest && strings.EqualFold(stringArg(c.Parameters, "connection"), n) {
			return true, "called " + describe(c)
		}
	}
	return false, "no call of " + n + callList(t)
}

// readsFrom: the request tool with connection n, or a store read (get, query, history) of store n.
func readsFrom(t *turn, n string) (bool, string) {
	for _, c := range t.ToolCalls {
		if c.Name == toolRequest && strings.EqualFold(stringArg(c.Parameters, "connection"), n) {
			return true, "called " + describe(c)
		}
		if s, action, ok := agent.ParseStoreToolName(c.Name); ok && sameStore(s, n) && slices.Contains([]string{"get", "query", "history"}, action) {
			return true, "called " + describe(c)
		}
	}
	return false, "no read of " + n + callList(t)
}

// writesTo: a store write (set, delete) of store n, or the request tool with connection n and a
// method other than GET or HEAD.
func writesTo(t *turn, n string) (bool, string) {
	for _, c := range t.ToolCalls {
		if s, action, ok := agent.ParseStoreToolName(c.Name); ok && sameStore(s, n) && (action == "set" || action == "delete") {
			return true, "called " + describe(c)
		}
		if c.Name == toolRequest && strings.EqualFold(stringArg(c.Parameters, "connection"), n) {
			switch strings.ToUpper(stringArg(c.Parameters, "method")) {
			case "GET", "HEAD", "":
			default:
				return true, "called " + describe(c)
			}
		}
	}
	return false, "no write to " + n + callList(t)
}

// loadsSkill: a skill_activated frame for skill n, or a load_skill call with name n.
func loadsSkill(t *turn, n string) (bool, string) {
	for _, s := range t.Skills {
		if strings.EqualFold(s, n) {
			return true, "skill " + s + " activated"
		}
	}
	for _, c := range t.ToolCalls {
		if c.Name == toolLoadSkill && strings.EqualFold(stringArg(c.Parameters, "name"), n) {
			return true, "called " + describe(c)
		}
	}
	return false, "skill " + n + " not loaded" + callList(t)
}

// loadsKnowledge: a load_knowledge call with name n.
func loadsKnowledge(t *turn, n string) (bool, string) {
	for _, c := range t.ToolCalls {
		if c.Name == toolLoadKnowledge && strings.EqualFold(stringArg(c.Parameters, "name"), n) {
			return true, "called " + describe(c)
		}
	}
	return false, "knowledge document " + n + " not loaded" + callList(t)
}

// endsWith: the done frame's reason is n (spaces read as underscores: "max turns" is max_turns).
func endsWith(t *turn, n string) (bool, string) {
	want := strings.ReplaceAll(strings.TrimSpace(n), " ", "_")
	if t.DoneReason == "" {
		return false, "the turn has no done frame"
	}
	if strings.EqualFold(t.DoneReason, want) {
		return true, "ended with " + t.DoneReason
	}
	return false, "ended with " + t.DoneReason
}

// describe names a call for a reason: `request(connection=forecast) success`.
func describe(c *ToolCall) string {
	s := c.Name
	var args []string
	for _, k := range [...]string{"connection", "method", "path", "name"} {
		if v := stringArg(c.Parameters, k); v != "" {
			args = append(args, k+"="+v)
		}
	}
	if len(args) > 0 {
		s += "(" + strings.Join(args, ", ") + ")"
	}
	if c.Status != "" {
		s += " " + c.Status
	}
	return s
}

// callList is "; calls: a, b" or "; no tool calls".
func callList(t *turn) string {
	if len(t.ToolCalls) == 0 {
		return "; no tool calls"
	}
	names := make([]string, len(t.ToolCalls))
	for i, c := range t.ToolCalls {
		names[i] = describe(c)
	}
	return fmt.Sprintf("; calls: %s", strings.Join(names, ", "))
}
