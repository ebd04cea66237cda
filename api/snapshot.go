package api

import (
	"encoding/json"
	"sort"

	"svc/agent"
	"svc/bundle"
	"svc/registry"
)

// snapshotOf is the resolved configuration of a bundle: what the runtime of the deployment
// serves. The agent model keeps env: references as written and never resolves them, so no
// secret value can appear here.
func snapshotOf(d registry.Deployment, m bundle.Manifest, a *agent.Agent) map[string]any {
	type named struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
	}
	var knowledge []named
	for _, k := range sortedValues(a.Knowledge) {
		knowledge = append(knowledge, named{k.Name, k.Description})
	}
	var skills []map[string]string
	for _, s := range sortedValues(a.Skills) {
		skills = append(skills, map[string]string{"name": s.Name, "trigger": s.Trigger})
	}
	var tools []map[string]any
	for _, t := range sortedValues(a.Tools) {
		execution := "inline"
		if t.Durable() {
			execution = "durable"
		}
		tools = append(tools, map[string]any{
			"name": t.Name, "description": t.Description, "parameters": json.RawMessage(orEmpty(t.Parameters)),
			"uses": t.Uses, "execution": execution, "layout": t.Layout,
		})
	}
	var connections []map[string]any
	for _, c := range sortedValues(a.Connections) {
		connections = append(connections, map[string]any{"name": c.Name, "spec": c.Spec, "policy": c.Policy, "access": c.Access})
	}
	var stores []*agent.Store
	stores = append(stores, sortedValues(a.Stores)...)
	var agents []*agent.NamedAgent
	agents = append(agents, sortedValues(a.Agents)...)
	var evals []map[string]any
	for _, e := range sortedValues(a.Evals) {
		evals = append(evals, map[string]any{"name": e.Name, "title": e.Title, "assertions": len(e.Assertions)})
	}
	return map[string]any{
		"deployId": d.ID, "environment": d.Environment, "commit": d.CommitSHA, "sourceVersionId": d.SourceVersionID,
		"digest": m.Digest, "bundleDigest": d.Digest,
		"config": a.Config, "agents": agents, "tools": tools, "connections": connections, "knowledge": knowledge,
		"skills": skills, "stores": stores, "evals": evals,
	}
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

func sortedValues[V any](m map[string]V) []V {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]V, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}
