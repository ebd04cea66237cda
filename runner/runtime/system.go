package runtime

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"svc/agent"
	"time"

	"svc/runner/access"
	"svc/runner/connections"
	"svc/runner/sse"
	"svc/runner/turn"
)

// health serves GET /health (CONTRACT §6). It needs no credentials.
func (rt *Runtime) health(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{"status": "ok", "deployId": rt.opts.DeployID, "agent": rt.ag.Config.Name, "version": rt.opts.Version}
	if rt.conns != nil {
		out["connections"] = rt.connHealth.snapshot() // a failing connection does not fail the runtime
	}
	writeJSON(w, http.StatusOK, out)
}

type namedText struct {
	Name string `json:"name"`
	Text string `json:"description"`
}

// inspectContext serves GET /inspect/context: the compiled system prompt, the tools, the
// active skills and the loaded knowledge. With ?session_id= it shows that session (its
// context filled in); otherwise the agent (?agent=, ?skill=) with its templates unfilled.
func (rt *Runtime) inspectContext(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	if err := trusted(who); err != nil {
		return err
	}
	q := r.URL.Query()
	out := map[string]any{}
	var prof *turn.Profile
	var agentName string
	active, loaded := []string{}, []string{}
	if id := q.Get("session_id"); id != "" {
		r.SetPathValue("id", id)
		s, err := visible(rt.turns, r, who)
		if err != nil {
			return err
		}
		prof = rt.profiles.ForSession(s)
		agentName = s.Agent
		out["session_id"] = s.ID
		out["system_prompt"] = prof.System(s.Context)
		active = append(active, s.State.ActiveSkills...)
		loaded = append(loaded, s.State.LoadedKnowledge...)
		out["compacted"] = s.State.Summary != ""
		out["messages"] = len(s.Messages)
		out["messages_in_context"] = len(s.Messages) - min(s.State.SummaryUpTo, len(s.Messages))
	} else {
		var err error
		agentName, prof, err = rt.profiles.Resolve(q.Get("agent"), q.Get("skill"))
		if err != nil {
			return err
		}
		out["system_prompt"] = prof.Prompt
		if prof.Skill != nil {
			active = append(active, prof.Skill.Name)
		}
	}
	knowledge := []namedText{}
	for _, k := range prof.Tools.Knowledge {
		knowledge = append(knowledge, namedText{k.Name, k.Description})
	}
	skills := []namedText{}
	for _, s := range prof.Tools.Skills {
		skills = append(skills, namedText{s.Name, s.Trigger})
	}
	toolNames := prof.Tools.Set.Names()
	if toolNames == nil {
		toolNames = []string{}
	}
	omitted := prof.Tools.Omitted
	if omitted == nil {
		omitted = []string{}
	}
	out["agent"] = agentName
	out["tools"] = toolNames
	out["omitted"] = omitted
	out["knowledge"] = knowledge
	out["skills"] = skills
	out["active_skills"] = active
	out["loaded_knowledge"] = loaded
	writeJSON(w, http.StatusOK, out)
	return nil
}

// inspectConnection serves GET /inspect/connections/{name}: the connection's spec with its
// base URL resolved and every credential shown as its env: name only, never its value.
func (rt *Runtime) inspectConnection(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	if err := trusted(who); err != nil {
		return err
	}
	name := r.PathValue("name")
	conn := rt.ag.Connections[name]
	if conn == nil {
		return &APIError{Code: CodeNotFound, Message: "no connection " + name}
	}
	spec := map[string]any{"format": conn.Spec.Format, "testPath": conn.Spec.TestPath}
	base := conn.Spec.BaseURL
	if ref, ok := strings.CutPrefix(base, "env:"); ok {
		spec["baseUrlRef"] = base
		v, set := rt.env(ref)
		spec["baseUrl"] = v
		spec["baseUrlSet"] = set
	} else {
		spec["baseUrl"] = base
	}
	if a := conn.Spec.Auth; a != nil {
		creds := func(m map[string]string) []map[string]any {
			out := []map[string]any{}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				ref := m[k]
				entry := map[string]any{"name": k, "value": ref}
				if v, ok := strings.CutPrefix(ref, "env:"); ok {
					_, set := rt.env(v)
					entry["set"] = set
				} else {
					entry["value"] = "(literal value hidden)"
				}
				out = append(out, entry)
			}
			return out
		}
		spec["auth"] = map[string]any{"headers": creds(a.Headers), "query": creds(a.Query)}
	}
	out := map[string]any{"name": conn.Name, "spec": spec, "surface": conn.Surface}
	if conn.Policy != nil {
		out["policy"] = conn.Policy
	}
	if conn.Access != nil {
		out["access"] = conn.Access
	}
	// The rules as the request tool applies them: policy.json and access.json merged, in the
	// order they are tried (most specific first), with hidden fields and the rate limit.
	d := connections.Describe(conn)
	out["rules"] = map[string]any{"endpoints": d.Endpoints, "hidden": d.Hidden, "rateLimit": d.RateLimit}
	if conn.Spec.Format == agent.FormatMCP && rt.conns != nil {
		// An MCP server's tools as the model is offered them (the last listing), each with the
		// rule its calls follow, and the server's state.
		tools, _ := rt.conns.MCPToolRules(conn.Name)
		st, _ := rt.conns.MCPStatus(conn.Name)
		delete(spec, "testPath")
		out["rules"] = map[string]any{"tools": tools, "rateLimit": d.RateLimit}
		out["mcp"] = st
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (rt *Runtime) env(name string) (string, bool) {
	if rt.opts.Env == nil {
		return "", false
	}
	return rt.opts.Env(name)
}

// Publish sends f to every subscriber of GET /api/events (session_updated, for durable
// sessions). Slow subscribers miss frames rather than slow the publisher.
func (rt *Runtime) Publish(f *sse.Frame) { rt.bus.publish(f) }

// heartbeat keeps idle event streams open through proxies.
const heartbeat = 25 * time.Second

// events serves GET /api/events: the runtime's event bus as SSE, until the client leaves or
// the runtime closes. Each caller receives the events of the sessions it may read (mayRead).
func (rt *Runtime) events(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	sub := rt.bus.subscribe()
	defer rt.bus.unsubscribe(sub)
	sw := sse.NewWriter(w)
	sw.Now = rt.now
	if err := sw.Start(); err != nil {
		return nil // the client is gone
	}
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-rt.done:
			return nil
		case <-t.C:
			if sw.Comment("ping") != nil {
				return nil
			}
		case f := <-sub:
			if f.SessionID != "" && !rt.mayRead(r, f.SessionID, who) {
				continue
			}
			if sw.Write(&f) != nil {
				return nil
			}
		}
	}
}

// mayRead reports whether who may GET the session or durable run id (spec 4.6): an event of
// GET /api/events reaches only such callers, so nobody learns of a run it may not read
// (CONTRACT §8). A durable run is judged by its own owner, scope and answerers, read from its
// journal; a chat session by the session store. A trusted caller without a scope claim reads
// everything and needs no look-up.
func (rt *Runtime) mayRead(r *http.Request, id string, who access.Identity) bool {
	if who.Trusted() && who.Scope == "" {
		return true
	}
	if strings.HasPrefix(id, durablePrefix) {
		run, err := rt.runs.Get(r.Context(), rt.dep.AgentID, id)
		return err == nil && (who.Scope == "" || run.ScopeID == who.Scope) && seesRun(who, run)
	}
	_, err := rt.turns.Get(r.Context(), who, id)
	return err == nil
}

// durablePrefix starts the id of every durable run (engine.StartRun).
const durablePrefix = "dur_"
