package tools

import (
	"slices"
	"strings"

	"svc/agent"
)

// Selection is the tools an agent gets, what it can reach through them, and what had to be
// left out because this runtime cannot run it yet.
type Selection struct {
	Set *Set
	// Knowledge are the documents load_knowledge reads (empty without that tool).
	Knowledge []*agent.Knowledge
	// Skills are the skills load_skill loads (empty without that tool).
	Skills []*agent.Skill
	// Omitted names, for people, each capability left out, such as "composite tool triage".
	Omitted []string
	// Connections is the system prompt's section on the connections the request tool reaches.
	Connections string
}

// Extensions are the tools other packages make from what an agent declares (they import this
// package, so ForAgent takes them as functions). A nil function leaves that kind of tool out,
// listed in Selection.Omitted.
type Extensions struct {
	// Stores returns the store tools of access modes by store name ("r" or "rw").
	Stores func(access map[string]string) []Tool
	// Connections returns the tools of the named connections (the request tool over the REST
	// ones, the <connection>__<tool> tools of the MCP ones) and the section of the system
	// prompt that describes them.
	Connections func(names []string) ([]Tool, string, error)
	// Handler returns the tool of a handler of svc/tools, inline or durable.
	Handler func(t *agent.Tool) (Tool, error)
	// Schemas compiles the parameter schemas of the selected tools; sharing one between the
	// selections of one agent compiles each schema once. nil compiles afresh.
	Schemas *Schemas
}

// ForAgent selects the tools of named, an agent of ag; named nil is the unscoped default chat,
// which gets the built-ins over every knowledge document and skill of the tree, and every
// store with access rw.
//
// ask_user is offered to a named agent that lists it; handoff to every agent when agents/
// defines more than one, over the others.
//
// Handler tools of svc/tools, inline and durable, come from ext.Handler; without it they are
// left out and listed in Omitted, never offered with a stand-in.
func ForAgent(ag *agent.Agent, named *agent.NamedAgent, ext Extensions) Selection {
	var sel Selection
	var ts []Tool
	addHandoff := func() {
		if len(ag.Agents) < 2 {
			return
		}
		var others []string
		for name, na := range ag.Agents {
			if na != named {
				others = append(others, name)
			}
		}
		ts = append(ts, NewHandoff(others))
	}
	addConnections := func(names []string) {
		if len(names) == 0 {
			return
		}
		if ext.Connections != nil {
			cts, prompt, err := ext.Connections(names)
			if err == nil {
				ts = append(ts, cts...)
				sel.Connections = prompt
				return
			}
			sel.Omitted = append(sel.Omitted, "connections ("+err.Error()+")")
			return
		}
		for _, name := range names {
			sel.Omitted = append(sel.Omitted, "connection "+name)
		}
	}
	addTool := func(t *agent.Tool) {
		if ext.Handler == nil {
			sel.Omitted = append(sel.Omitted, toolKind(t)+" "+t.Name)
			return
		}
		h, err := ext.Handler(t)
		if err != nil {
			sel.Omitted = append(sel.Omitted, toolKind(t)+" "+t.Name+" ("+err.Error()+")")
			return
		}
		ts = append(ts, h)
	}
	addStores := func(access map[string]string) {
		if ext.Stores == nil {
			for _, name := range sortedNames(access) {
				sel.Omitted = append(sel.Omitted, "store "+name)
			}
			return
		}
		ts = append(ts, ext.Stores(access)...)
	}
	addKnowledge := func() {
		if len(ag.Knowledge) == 0 {
			return
		}
		lk := NewLoadKnowledge(ag.Knowledge)
		ts = append(ts, lk)
		for _, n := range lk.names {
			sel.Knowledge = append(sel.Knowledge, ag.Knowledge[n])
		}
	}
	addSkills := func(names []string) {
		skills := make(map[string]*agent.Skill, len(names))
		for _, n := range names {
			if sk := ag.Skills[n]; sk != nil {
				skills[n] = sk
			}
		}
		if len(skills) == 0 {
			return
		}
		ls := NewLoadSkill(skills)
		ts = append(ts, ls)
		for _, n := range ls.names {
			sel.Skills = append(sel.Skills, skills[n])
		}
	}

	if named == nil {
		addSkills(sortedNames(ag.Skills))
		addKnowledge()
		for _, name := range sortedNames(ag.Tools) {
			addTool(ag.Tools[name])
		}
		addConnections(sortedNames(ag.Connections))
		all := make(map[string]string, len(ag.Stores))
		for name := range ag.Stores {
			all[name] = "rw"
		}
		addStores(all)
		addHandoff()
		sel.Set = ext.Schemas.NewSet(ts...)
		return sel
	}

	for _, name := range named.Tools {
		switch {
		case name == NameLoadSkill:
			skills := named.Skills
			if len(skills) == 0 {
				skills = sortedNames(ag.Skills)
			}
			addSkills(skills)
		case name == NameLoadKnowledge:
			addKnowledge()
		case name == NameAskUser:
			ts = append(ts, NewAskUser())
		case name == NameHandoff: // offered below whenever there is another agent
		case ag.Tools[name] != nil:
			addTool(ag.Tools[name])
		case strings.HasPrefix(name, "store__"):
			if ext.Stores == nil {
				sel.Omitted = append(sel.Omitted, "store tool "+name)
			} // else offered by its store's access mode below
		default:
			sel.Omitted = append(sel.Omitted, "tool "+name)
		}
	}
	addConnections(named.Connections)
	addStores(named.Stores)
	sel.Omitted = slices.Compact(sel.Omitted)
	addHandoff()
	sel.Set = ext.Schemas.NewSet(ts...)
	return sel
}

// toolKind names what a tool of svc/tools is, for the warning that leaves it out.
func toolKind(t *agent.Tool) string {
	switch {
	case t.Durable():
		return "durable tool"
	case len(t.Uses.Tools)+len(t.Uses.Subagents) > 0:
		return "composite tool"
	}
	return "handler tool"
}
