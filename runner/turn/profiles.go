package turn

import (
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"svc/agent"
	"svc/runner/loop"
	"svc/runner/sessions"
	"svc/runner/tools"
)

// Profile is what a session of one named agent and skill gets: its tools and its system prompt
// (templates not filled yet).
type Profile struct {
	Named *agent.NamedAgent // nil for the agent's unscoped chat
	Skill *agent.Skill      // nil without a skill
	Tools tools.Selection
	// Prompt is the compiled system prompt; Templated says it holds {{context.KEY}} templates.
	Prompt    string
	Templated bool
	// Omitted is the warning naming the tools left out of the session, or "".
	Omitted string
}

// name is the named agent of the profile, "" for the unscoped chat.
func (p *Profile) name() string {
	if p.Named == nil {
		return ""
	}
	return p.Named.Name
}

// System is the profile's system prompt with the session context filled in.
func (p *Profile) System(context map[string]string) string {
	if !p.Templated {
		return p.Prompt
	}
	return loop.Fill(p.Prompt, context)
}

// profileKey names a (named agent, skill) pair; "" is the unscoped chat or no skill.
type profileKey struct{ agent, skill string }

// Profiles are the profiles of one agent. They are built at once and rebuilt by Rebuild when a
// tool source changes (an MCP server's tool list); a turn keeps the profile it started with.
// Safe for concurrent use.
type Profiles struct {
	ag    *agent.Agent
	ext   tools.Extensions
	extra []tools.Tool
	m     atomic.Pointer[map[profileKey]*Profile]
}

// NewProfiles builds a profile for every (named agent, skill) pair of ag, with the tools ext
// makes. extra are host tools offered to every profile after the agent's own (a tool of the
// same name replaces the agent's).
func NewProfiles(ag *agent.Agent, ext tools.Extensions, extra []tools.Tool) *Profiles {
	if ext.Schemas == nil {
		ext.Schemas = &tools.Schemas{} // each tool's parameter schema compiled once for all profiles
	}
	ps := &Profiles{ag: ag, ext: ext, extra: extra}
	ps.Rebuild()
	return ps
}

// Rebuild builds the profiles again from the tool sources, as they are now, and puts them in
// place for the turns that start next.
func (ps *Profiles) Rebuild() {
	ag, ext, extra := ps.ag, ps.ext, ps.extra
	m := make(map[profileKey]*Profile)
	skills := []string{""}
	for n := range ag.Skills {
		skills = append(skills, n)
	}
	add := func(name string, named *agent.NamedAgent) {
		sel := tools.ForAgent(ag, named, ext)
		if len(extra) > 0 {
			sel.Set = sel.Set.With(extra...)
		}
		for _, sk := range skills {
			p := &Profile{Named: named, Tools: sel}
			pr := loop.Prompt{BasePrompt: ag.Config.BasePrompt, Knowledge: sel.Knowledge, Skills: sel.Skills, Connections: sel.Connections}
			if named != nil {
				pr.Instructions = named.Instructions
			}
			if sk != "" {
				p.Skill = ag.Skills[sk]
				pr.Active = p.Skill
			}
			p.Prompt = pr.Compile()
			p.Templated = strings.Contains(p.Prompt, "{{")
			if len(sel.Omitted) > 0 {
				p.Omitted = "Not available in this runtime yet, so left out of this session's tools: " + strings.Join(sel.Omitted, ", ") + "."
			}
			m[profileKey{name, sk}] = p
		}
	}
	add("", nil)
	for name, na := range ag.Agents {
		add(name, na)
	}
	ps.m.Store(&m)
}

// profiles is the current set.
func (ps *Profiles) profiles() map[profileKey]*Profile { return *ps.m.Load() }

// ToolNames returns the names of the tools any profile offers, sorted.
func (ps *Profiles) ToolNames() []string {
	set := map[string]bool{}
	for _, p := range ps.profiles() {
		for _, n := range p.Tools.Set.Names() {
			set[n] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Resolve picks the profile of a request's agent and skill fields and the agent name a session
// records: "default" when the request names none and the agent has a default named agent. An
// unknown name is an Invalid Error naming the field.
func (ps *Profiles) Resolve(agentName, skill string) (string, *Profile, error) {
	ag := ps.ag
	if agentName == "" {
		if ag.DefaultAgent() != nil {
			agentName = "default"
		}
	} else if ag.Agents[agentName] == nil {
		return "", nil, invalid("agent", "unknown agent %q (agents: %s)", agentName, strings.Join(slices.Sorted(maps.Keys(ag.Agents)), ", "))
	}
	if skill != "" {
		if ag.Skills[skill] == nil {
			return "", nil, invalid("skill", "unknown skill %q", skill)
		}
		if na := ag.Agents[agentName]; na != nil && len(na.Skills) > 0 && !slices.Contains(na.Skills, skill) {
			return "", nil, invalid("skill", "agent %q has no skill %q (skills: %s)", agentName, skill, strings.Join(na.Skills, ", "))
		}
	}
	return agentName, ps.profiles()[profileKey{agentName, skill}], nil
}

// ForSession is the profile of a stored session; a session whose agent or skill no longer
// exists (after a deploy) falls back to the default chat of its agent, then of the agent.
func (ps *Profiles) ForSession(s *sessions.Session) *Profile {
	m := ps.profiles()
	if p := m[profileKey{s.Agent, s.Skill}]; p != nil {
		return p
	}
	if p := m[profileKey{s.Agent, ""}]; p != nil {
		return p
	}
	name, p, err := ps.Resolve("", "")
	if err != nil || p == nil {
		return m[profileKey{name, ""}]
	}
	return p
}
