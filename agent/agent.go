package agent

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Agent is one validated agent source tree: the config file and every source file, typed.
// The zero value is not useful; build one with Load or LoadDir.
type Agent struct {
	Config      Config
	Connections map[string]*Connection // by directory name under svc/connections
	Knowledge   map[string]*Knowledge  // by file name without .md under svc/knowledge
	Skills      map[string]*Skill      // by the name parsed from the "# Skill: <name>" heading
	Stores      map[string]*Store      // by file name without .json under svc/stores
	Tools       map[string]*Tool       // by directory name under svc/tools (equal to tool.json "name")
	Agents      map[string]*NamedAgent // by directory name under agents/; folders without AGENT.md are left out
	Evals       map[string]*Eval       // by file name without .md under evals/
	// Files maps every regular file of the tree (slash paths relative to the root) to its size in bytes.
	Files map[string]int64
}

// Config is the parsed svc.json file.
type Config struct {
	Name        string              `json:"name"`
	Version     string              `json:"version"`
	Description string              `json:"description,omitempty"`
	Models      map[string]ModelRef `json:"models,omitempty"` // key "main" is the agent's model
	BasePrompt  string              `json:"basePrompt,omitempty"`
	Stores      *StoresConfig       `json:"stores,omitempty"`
	CI          *CIConfig           `json:"ci,omitempty"`
	Scope       *ScopeConfig        `json:"scope,omitempty"`
	Guardrails  *Guardrails         `json:"guardrails,omitempty"`
	Channels    *ChannelsConfig     `json:"channels,omitempty"`
}

// ModelRef names a model of a provider. APIKey and BaseURL may be env: references.
type ModelRef struct {
	Provider string `json:"provider"` // openai | anthropic | openai-compatible | echo
	Model    string `json:"model"`
	BaseURL  string `json:"baseUrl,omitempty"`
	APIKey   string `json:"apiKey,omitempty"`
	Effort   string `json:"effort,omitempty"`
}

// StoresConfig selects the backend of the agent's stores. URL is an env: reference.
type StoresConfig struct {
	Backend string `json:"backend"` // memory | sqlite | postgres
	URL     string `json:"url,omitempty"`
}

// CIConfig is the "ci" entry of svc.json.
type CIConfig struct {
	Deploy *DeployFilter `json:"deploy,omitempty"`
}

// DeployFilter restricts which pushes build: a push to a branch that matches none of Branches
// (path.Match glob patterns) builds nothing. An empty list allows every branch.
type DeployFilter struct {
	Branches []string `json:"branches,omitempty"`
}

// Allows reports whether a push to branch builds: no filter, an empty list, or a pattern that
// matches. A nil filter allows every branch.
func (f *DeployFilter) Allows(branch string) bool {
	if f == nil || len(f.Branches) == 0 {
		return true
	}
	for _, pat := range f.Branches {
		if ok, err := path.Match(pat, branch); err == nil && ok {
			return true
		}
	}
	return false
}

// ScopeConfig is the "scope" entry of svc.json.
type ScopeConfig struct {
	RequireScope bool `json:"requireScope,omitempty"`
}

// Connection is one svc/connections/<name> folder.
type Connection struct {
	Name    string
	Spec    ConnectionSpec
	Policy  *Policy // nil when policy.json is absent
	Access  *Access // nil when access.json is absent
	Surface string  // surface.md, free text for the model
}

// ConnectionSpec is connections/<name>/spec.json. BaseURL may be an env: reference.
type ConnectionSpec struct {
	BaseURL  string `json:"baseUrl"`
	Format   string `json:"format"`             // rest | mcp (FormatREST, FormatMCP)
	TestPath string `json:"testPath,omitempty"` // rest only

	Auth *ConnectionAuth `json:"auth,omitempty"`
}

// ConnectionAuth maps credential names to env:<VARIABLE> references, sent as headers or query parameters.
type ConnectionAuth struct {
	Headers map[string]string `json:"headers,omitempty"`
	Query   map[string]string `json:"query,omitempty"`
}

// Policy is connections/<name>/policy.json.
type Policy struct {
	// Endpoints maps "*" or "<METHOD> <path pattern>" (e.g. "GET /incidents/{id}") to its rule.
	Endpoints map[string]EndpointRule `json:"endpoints"`
	// Tools maps "*" or an MCP tool's name to allow | confirm | deny (mcp connections only).
	Tools map[string]string `json:"tools,omitempty"`
}

// EndpointRule is one entry of a connection policy.
type EndpointRule struct {
	Returns []string `json:"returns,omitempty"`
	Confirm string   `json:"confirm,omitempty"` // never | always | write
	Reason  string   `json:"reason,omitempty"`
}

// Access is connections/<name>/access.json: enforced endpoint rules, hidden fields and a rate limit.
type Access struct {
	// Endpoints maps "*" or "<METHOD> <path pattern>" to allow | confirm | deny.
	Endpoints map[string]string `json:"endpoints,omitempty"`
	// Tools maps "*" or an MCP tool's name to allow | confirm | deny (mcp connections only).
	Tools map[string]string `json:"tools,omitempty"`
	// Hidden lists response fields (JSON object keys, at any depth) stripped before the model sees them.
	Hidden []string `json:"hidden,omitempty"`
	// RateLimit bounds requests through this connection.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
}

// RateLimit is a per-connection request budget.
type RateLimit struct {
	RequestsPerMinute int `json:"requestsPerMinute"`
	Burst             int `json:"burst,omitempty"`
}

// Knowledge is one svc/knowledge/<doc>.md file.
type Knowledge struct {
	Name        string
	Description string // front matter "description"
	Body        string // the markdown after the front matter
}

// Skill is one svc/skills/<dir>/SKILL.md file.
type Skill struct {
	Name     string // from the "# Skill: <name>" heading
	Dir      string
	Trigger  string            // the text after "Trigger:"
	Body     string            // the whole file
	Sections map[string]string // "## <title>" sections by title
}

// Store is one svc/stores/<store>.json file.
type Store struct {
	Name    string      `json:"name"`
	Entity  StoreEntity `json:"entity"`
	History struct {
		Versions int `json:"versions"`
	} `json:"history"`
	Trace bool `json:"trace,omitempty"`
}

// StoreEntity describes the entities a store holds.
type StoreEntity struct {
	Name   string                `json:"name"`
	Key    string                `json:"key"` // template such as "{customer_id}-{number}"
	Schema map[string]StoreField `json:"schema"`
}

// StoreField is one field of a store entity. Type is string | integer | number | boolean | enum | object | array.
type StoreField struct {
	Type   string   `json:"type"`
	Values []string `json:"values,omitempty"` // when Type is enum
}

// StoreActions lists the generated store tool actions, in a fresh slice.
func StoreActions() []string { return []string{"get", "set", "query", "delete", "history"} }

// StoreToolName is the generated tool name for a store action: store__<name>__<action>, hyphens to underscores.
func StoreToolName(store, action string) string {
	return "store__" + strings.ReplaceAll(store, "-", "_") + "__" + action
}

// ParseStoreToolName splits a generated store tool name; ok is false when name is not of that form.
func ParseStoreToolName(name string) (store, action string, ok bool) {
	rest, found := strings.CutPrefix(name, "store__")
	if !found {
		return "", "", false
	}
	i := strings.LastIndex(rest, "__")
	if i <= 0 || i+2 >= len(rest) {
		return "", "", false
	}
	return rest[:i], rest[i+2:], true
}

// Tool is one svc/tools/<tool> folder.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Uses        Uses            `json:"uses"`
	Execution   string          `json:"execution,omitempty"` // "durable" or "" (inline)
	// RequiresConfirmation makes every call of the tool wait for the user's approval.
	RequiresConfirmation bool `json:"requiresConfirmation,omitempty"`
	// Layout is "handler" (tool.json + handler.ts) or "tool.ts" (tool.ts present; tool.json ignored,
	// composition methods not bound).
	Layout string `json:"-"`
	// Source is the TypeScript of handler.ts (or tool.ts); SourcePath its slash path in the tree.
	Source     string `json:"-"`
	SourcePath string `json:"-"`
	// JS is the compiled CommonJS program (esbuild) with an inline source map naming SourcePath.
	JS string `json:"-"`
}

// Durable reports whether the tool pauses and resumes through a journal.
func (t *Tool) Durable() bool { return t.Execution == "durable" }

// Uses declares the child tools and subagents a handler may call.
type Uses struct {
	Tools     []string `json:"tools,omitempty"`
	Subagents []string `json:"subagents,omitempty"`
}

// NamedAgent is one agents/<agent> folder with its AGENT.md.
type NamedAgent struct {
	Name         string            `json:"name"`
	Tools        []string          `json:"tools"`
	Skills       []string          `json:"skills"`
	Connections  []string          `json:"connections"`
	Stores       map[string]string `json:"stores"` // store name → access mode r | rw
	Instructions string            `json:"-"`      // AGENT.md
}

// Eval is one evals/<eval>.md file.
type Eval struct {
	Name        string
	Title       string            // from "# Eval: <title>"
	Description string            // text between the heading and "## Setup"
	Context     map[string]string // from the "Context: k=v, k2=v2" line of "## Setup"
	// AllowWrites names the connections the eval lets the agent write to, from the "Allow
	// writes: a, b" line of "## Setup" ("*" for every one); empty: no connection writes.
	AllowWrites []string
	Query       string // the quoted user message of "## Query", quotes removed
	Assertions  []Assertion
}

// Assertion is one bullet of an eval's "## Assertions".
type Assertion struct {
	Text     string
	Negative bool // "Should NOT ..."
}

// Problem is one thing wrong with a source tree.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	}
	return p.File + ": " + p.Message
}

// Problems is the error returned for an invalid tree; it lists every problem found, sorted by file and line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return "agent: invalid source tree:\n" + strings.Join(lines, "\n")
}

func (ps Problems) sort() {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].File != ps[j].File {
			return ps[i].File < ps[j].File
		}
		return ps[i].Line < ps[j].Line
	})
}

// DefaultAgent returns the named agent "default" when defined, else nil (the unscoped default chat).
func (a *Agent) DefaultAgent() *NamedAgent { return a.Agents["default"] }

// MainModel returns the "main" model of svc.json and whether one is configured.
func (a *Agent) MainModel() (ModelRef, bool) {
	m, ok := a.Config.Models["main"]
	return m, ok
}
