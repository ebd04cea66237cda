package agent

import (
	"testing"
)

// refTree has one of everything an agent or tool can name.
func refTree(files map[string]string) map[string]string {
	out := map[string]string{
		"svc/stores/tickets.json":          `{"name": "tickets", "entity": {"name": "T", "key": "{id}", "schema": {"id": {"type": "string"}}}}`,
		"svc/stores/due-dates.json":        `{"name": "due-dates", "entity": {"name": "D", "key": "{id}", "schema": {"id": {"type": "string"}}}}`,
		"svc/skills/money/SKILL.md":        "# Skill: refunds\nTrigger: money\n",
		"svc/connections/status/spec.json": `{"baseUrl": "https://status.example.com", "format": "rest"}`,
		"svc/tools/triage/tool.json":       `{"name": "triage", "parameters": {"type": "object"}}`,
		"svc/tools/triage/handler.ts":      "export default async () => 1\n",
		"agents/billing/AGENT.md":          "# Billing\n",
	}
	for k, v := range files {
		out[k] = v
	}
	return out
}

func TestAgentReferences(t *testing.T) {
	agentJSON := func(text string) map[string]string {
		return refTree(map[string]string{"agents/default/agent.json": text})
	}
	const file = "agents/default/agent.json"
	runTreeCases(t, []treeCase{
		{name: "everything resolves", files: agentJSON(`{"name": "default",
  "tools": ["load_skill", "load_knowledge", "triage", "store__tickets__get", "store__tickets__set", "store__due_dates__query"],
  "skills": ["refunds"], "connections": ["status"], "stores": {"tickets": "rw", "due-dates": "r"}}`)},
		{name: "unknown names", files: agentJSON(`{"name": "default",
  "tools": ["nope", "store__ghost__get", "store__tickets__get"],
  "skills": ["money"],
  "connections": ["stat"],
  "stores": {"ghost": "rw"}}`),
			want: []Problem{
				{File: file, Line: 2, Message: `unknown tool "nope": not a built-in (load_skill, load_knowledge, ask_user, handoff), a folder under svc/tools or a store__<store>__<action> tool`},
				{File: file, Line: 2, Message: `unknown tool "store__ghost__get": not a built-in (load_skill, load_knowledge, ask_user, handoff), a folder under svc/tools or a store__<store>__<action> tool`},
				{File: file, Line: 2, Message: `tool "store__tickets__get" needs access to store "tickets": add it to "stores"`},
				{File: file, Line: 3, Message: `unknown skill "money": no svc/skills/*/SKILL.md has the heading "# Skill: money"`},
				{File: file, Line: 4, Message: `unknown connection "stat": no folder svc/connections/stat`},
				{File: file, Line: 5, Message: `unknown store "ghost": no file svc/stores/ghost.json`},
			}},
		{name: "read-only store", files: agentJSON(`{"name": "default", "stores": {"tickets": "r"},
  "tools": ["store__tickets__get", "store__tickets__query", "store__tickets__history", "store__tickets__set", "store__tickets__delete"]}`),
			want: []Problem{
				{File: file, Line: 2, Message: `tool "store__tickets__set" writes store "tickets", but the agent's access mode is "r"`},
				{File: file, Line: 2, Message: `tool "store__tickets__delete" writes store "tickets", but the agent's access mode is "r"`},
			}},
		{name: "bad mode", files: agentJSON(`{"name": "default", "stores": {"tickets": "w"}}`),
			want: []Problem{{File: file, Line: 1, Message: `store "tickets": access mode must be "r" or "rw", got "w"`}}},
		{name: "duplicates", files: agentJSON(`{"name": "default", "tools": ["triage", "triage"], "skills": ["refunds", "refunds"]}`),
			want: []Problem{
				{File: file, Line: 1, Message: `tools: "triage" is listed twice`},
				{File: file, Line: 1, Message: `skills: "refunds" is listed twice`},
			}},
		{name: "name must equal folder", files: agentJSON(`{"name": "main"}`),
			want: []Problem{{File: file, Line: 1, Message: `field "name" is "main" but must equal the folder name "default"`}}},
		{name: "missing name", files: agentJSON(`{"tools": []}`),
			want: []Problem{{File: file, Message: `missing required field "name" (the folder name, "default")`}}},
		{name: "strict fields", files: agentJSON(`{"name": "default", "model": "x", "tools": "triage"}`),
			want: []Problem{
				{File: file, Line: 1, Message: `unknown field "model"`},
				{File: file, Line: 1, Message: `field "tools" must be an array, got a string`},
			}},
		{name: "invalid JSON still an agent", files: agentJSON(`{"name": `),
			want: []Problem{{File: file, Line: 1, Message: "invalid JSON: unexpected end of file"}}},
	})
}

func TestToolUsesReferences(t *testing.T) {
	uses := func(u string) map[string]string {
		return refTree(map[string]string{
			"svc/tools/composite/tool.json":  `{"name": "composite", "parameters": {"type": "object"}, "uses": ` + u + `}`,
			"svc/tools/composite/handler.ts": "export default async () => 1\n",
		})
	}
	const file = "svc/tools/composite/tool.json"
	runTreeCases(t, []treeCase{
		{name: "everything resolves", files: uses(`{"tools": ["triage", "load_knowledge", "store__tickets__delete", "store__due_dates__set"], "subagents": ["billing"]}`)},
		{name: "unknown names", files: uses(`{"tools": ["composite", "nope", "store__ghost__get", "store__tickets__purge"], "subagents": ["default", "notes"]}`),
			want: []Problem{
				{File: file, Line: 1, Message: `uses.tools: tool "composite" may not use itself`},
				{File: file, Line: 1, Message: `uses.tools: unknown tool "nope": not a built-in, a folder under svc/tools or a tool of a store under svc/stores`},
				{File: file, Line: 1, Message: `uses.tools: unknown tool "store__ghost__get": not a built-in, a folder under svc/tools or a tool of a store under svc/stores`},
				{File: file, Line: 1, Message: `uses.tools: unknown tool "store__tickets__purge": not a built-in, a folder under svc/tools or a tool of a store under svc/stores`},
				{File: file, Line: 1, Message: `uses.subagents: unknown agent "notes": no agents/notes/AGENT.md`},
			}},
		{name: "subagent without AGENT.md", files: func() map[string]string {
			f := uses(`{"subagents": ["drafts"]}`)
			f["agents/drafts/agent.json"] = `{"name": "drafts"}`
			return f
		}(), want: []Problem{{File: file, Line: 1, Message: `uses.subagents: unknown agent "drafts": no agents/drafts/AGENT.md`}}},
		{name: "duplicates", files: uses(`{"tools": ["triage", "triage"]}`),
			want: []Problem{{File: file, Line: 1, Message: `uses.tools: "triage" is listed twice`}}},
		{name: "unknown uses field", files: uses(`{"tools": [], "agents": []}`),
			want: []Problem{{File: file, Line: 1, Message: `unknown field "uses.agents"`}}},
	})
}
