package agent

import (
	"fmt"
	"slices"
)

// storeTool is one generated store tool.
type storeTool struct {
	store, action string
}

// isWriteAction reports whether a store action changes the store.
func isWriteAction(action string) bool { return action == "set" || action == "delete" }

// checkReferences checks every name that one file gives to something defined in another:
// agent.json tools, skills, connections and stores, and tool.json uses.
func (l *loader) checkReferences() {
	a := l.agent
	generated := map[string]storeTool{}
	for name := range a.Stores {
		for _, action := range StoreActions() {
			generated[StoreToolName(name, action)] = storeTool{store: name, action: action}
		}
	}
	builtins := BuiltinTools()

	for _, name := range sortedKeys(a.Agents) {
		na := a.Agents[name]
		file := "agents/" + name + "/agent.json"
		doc := l.agentDocs[name]
		dups := duplicateChecker(file, doc, &l.c)
		for i, t := range na.Tools {
			field := fmt.Sprintf("tools[%d]", i)
			if dups("tools", field, t) {
				continue
			}
			if slices.Contains(builtins, t) || a.Tools[t] != nil {
				continue
			}
			st, isStoreTool := generated[t]
			switch mode, access := na.Stores[st.store]; {
			case !isStoreTool:
				c := "unknown tool %q: not a built-in (load_skill, load_knowledge, ask_user, handoff), a folder under svc/tools or a store__<store>__<action> tool"
				l.c.add(file, doc.line(field), c, t)
			case !access:
				l.c.add(file, doc.line(field), "tool %q needs access to store %q: add it to \"stores\"", t, st.store)
			case mode == ModeRead && isWriteAction(st.action):
				l.c.add(file, doc.line(field), "tool %q writes store %q, but the agent's access mode is %q", t, st.store, mode)
			}
		}
		for i, s := range na.Skills {
			field := fmt.Sprintf("skills[%d]", i)
			if !dups("skills", field, s) && a.Skills[s] == nil {
				l.c.add(file, doc.line(field), "unknown skill %q: no svc/skills/*/SKILL.md has the heading \"# Skill: %s\"", s, s)
			}
		}
		for i, conn := range na.Connections {
			field := fmt.Sprintf("connections[%d]", i)
			if !dups("connections", field, conn) && a.Connections[conn] == nil {
				l.c.add(file, doc.line(field), "unknown connection %q: no folder svc/connections/%s", conn, conn)
			}
		}
		for _, s := range sortedKeys(na.Stores) {
			if a.Stores[s] == nil {
				l.c.add(file, doc.line("stores."+s), "unknown store %q: no file svc/stores/%s.json", s, s)
			}
		}
	}

	for _, name := range sortedKeys(a.Tools) {
		t := a.Tools[name]
		if t.Layout != LayoutHandler {
			continue
		}
		file := "svc/tools/" + name + "/tool.json"
		doc := l.toolDocs[name]
		dups := duplicateChecker(file, doc, &l.c)
		for i, u := range t.Uses.Tools {
			field := fmt.Sprintf("uses.tools[%d]", i)
			switch {
			case dups("uses.tools", field, u):
			case u == name:
				l.c.add(file, doc.line(field), "uses.tools: tool %q may not use itself", u)
			case slices.Contains(builtins, u) || a.Tools[u] != nil:
			case generated[u] != storeTool{}:
			case u == ConnectionToolName && len(a.Connections) > 0: // the connections' request tool
			case u == ConnectionToolName:
				l.c.add(file, doc.line(field), "uses.tools: tool %q calls the agent's connections, and there is no folder under svc/connections", u)
			default:
				l.c.add(file, doc.line(field), "uses.tools: unknown tool %q: not a built-in, a folder under svc/tools or a tool of a store under svc/stores", u)
			}
		}
		for i, s := range t.Uses.Subagents {
			field := fmt.Sprintf("uses.subagents[%d]", i)
			if !dups("uses.subagents", field, s) && a.Agents[s] == nil {
				l.c.add(file, doc.line(field), "uses.subagents: unknown agent %q: no agents/%s/AGENT.md", s, s)
			}
		}
	}

	for _, name := range sortedKeys(a.Evals) {
		for _, conn := range a.Evals[name].AllowWrites {
			if conn != "*" && a.Connections[conn] == nil {
				l.c.add("evals/"+name+".md", 0, `"Allow writes:" names %q, which is not a connection (no folder svc/connections/%s)`, conn, conn)
			}
		}
	}
}

// duplicateChecker returns a function that reports (and records a problem for) a value listed
// twice in the same list.
func duplicateChecker(file string, doc *jsonDoc, c *collector) func(list, field, value string) bool {
	seen := map[string]bool{}
	return func(list, field, value string) bool {
		key := list + "\x00" + value
		if seen[key] {
			c.add(file, doc.line(field), "%s: %q is listed twice", list, value)
			return true
		}
		seen[key] = true
		return false
	}
}
