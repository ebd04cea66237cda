package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"svc/agent/agenttest"
)

// loadFixture loads a fixture and returns the agent and its problems (nil when valid).
func loadFixture(tb testing.TB, name string) (*Agent, Problems) {
	tb.Helper()
	a, err := LoadDir(agenttest.Dir(tb, name))
	if a == nil {
		tb.Fatalf("LoadDir(%s) returned no agent: %v", name, err)
	}
	if err == nil {
		return a, nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		tb.Fatalf("LoadDir(%s) error is %T, want Problems: %v", name, err, err)
	}
	return a, ps
}

func TestBrokenFixture(t *testing.T) {
	_, ps := loadFixture(t, "broken")
	for _, p := range ps {
		t.Log(p)
	}
	// Every problem listed in fixtures/agents/broken/README.md.
	tests := []struct {
		file, message string
		line          int
	}{
		{file: "svc.json", message: `missing required field "version"`},
		{file: "svc.json", message: `unknown field "colour"`, line: 1},
		{file: "agents/default/agent.json", message: `unknown tool "no_such_tool"`, line: 1},
		{file: "agents/default/agent.json", message: `unknown skill "missing-skill"`, line: 1},
		{file: "agents/default/agent.json", message: `unknown connection "nope"`, line: 1},
		{file: "agents/default/agent.json", message: `unknown store "ghost"`, line: 1},
		{file: "svc/skills/x/SKILL.md", message: `first line must be the heading "# Skill: <name>"`, line: 1},
		{file: "svc/tools/bad/tool.json", message: `unknown tool "undeclared_child"`, line: 1},
		{file: "svc/tools/bad/tool.json", message: `unknown agent "nobody"`, line: 1},
		{file: "svc/tools/bad/handler.ts", message: "TypeScript does not compile", line: 2},
	}
	for _, tt := range tests {
		t.Run(tt.file+" "+tt.message, func(t *testing.T) {
			found := slices.ContainsFunc(ps, func(p Problem) bool {
				return p.File == tt.file && p.Line == tt.line && strings.Contains(p.Message, tt.message)
			})
			if !found {
				t.Errorf("no problem %s:%d containing %q", tt.file, tt.line, tt.message)
			}
		})
	}
	if len(ps) != len(tests) {
		t.Errorf("got %d problems, want the %d of the README", len(ps), len(tests))
	}
	if !slices.IsSortedFunc(ps, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	}) {
		t.Error("problems are not sorted by file and line")
	}
}

func TestHelloFixture(t *testing.T) {
	a, ps := loadFixture(t, "hello")
	if ps != nil {
		t.Fatalf("hello has problems:\n%v", ps)
	}
	want := Config{Name: "hello", Version: "0.1.0", Description: "The smallest agent: one instruction file."}
	if diff := cmp.Diff(want, a.Config); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
	wantAgent := &NamedAgent{
		Name: "default", Tools: []string{}, Skills: []string{}, Connections: []string{}, Stores: map[string]string{},
		Instructions: "# Hello\n\nAnswer in one short, friendly sentence.\n",
	}
	if diff := cmp.Diff(wantAgent, a.DefaultAgent()); diff != "" {
		t.Errorf("DefaultAgent() (-want +got):\n%s", diff)
	}
	if _, ok := a.MainModel(); ok {
		t.Error("MainModel() ok = true for an agent without models")
	}
	wantFiles := map[string]int64{"agents/default/AGENT.md": 49, "agents/default/agent.json": 82, "svc.json": 100}
	if diff := cmp.Diff(wantFiles, a.Files); diff != "" {
		t.Errorf("Files (-want +got):\n%s", diff)
	}
}

func TestSupportDeskFixture(t *testing.T) {
	a, ps := loadFixture(t, "support-desk")
	if ps != nil {
		t.Fatalf("support-desk has problems:\n%v", ps)
	}
	opts := cmpopts.EquateEmpty()

	wantConfig := Config{
		Name:        "support-desk",
		Version:     "1.4.0",
		Description: "Answers customer questions, files tickets and runs refund approvals.",
		Models:      map[string]ModelRef{"main": {Provider: "echo", Model: "echo"}},
		BasePrompt:  "You are the support desk of Acme. Be brief and exact. The customer's plan is {{context.plan}}.",
		Stores:      &StoresConfig{Backend: "sqlite", URL: "env:SUPPORT_DB_URL"},
		CI:          &CIConfig{Deploy: &DeployFilter{Branches: []string{"main", "release/*", "feature/*"}}},
	}
	if diff := cmp.Diff(wantConfig, a.Config); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}

	wantSkills := map[string]*Skill{"refunds": {
		Name:    "refunds",
		Dir:     "refunds",
		Trigger: "the customer asks for money back, a credit or a refund.",
		Body:    readFixtureFile(t, "support-desk", "svc/skills/refunds/SKILL.md"),
		Sections: map[string]string{
			"Behavior": "1. Load the knowledge document `refund-policy` before answering.\n" +
				"2. Look up the customer's tickets with `store__tickets__query`.\n" +
				"3. For an eligible refund, call the `refund_request` tool; never promise an amount before it returns.",
			"Constraints": "- Never refund a monthly plan outside the outage rule.\n- Never reveal internal ticket notes.",
		},
	}}
	if diff := cmp.Diff(wantSkills, a.Skills); diff != "" {
		t.Errorf("Skills (-want +got):\n%s", diff)
	}

	wantStore := &Store{
		Name: "tickets",
		Entity: StoreEntity{
			Name: "Ticket",
			Key:  "{customer_id}-{number}",
			Schema: map[string]StoreField{
				"customer_id": {Type: "string"},
				"number":      {Type: "integer"},
				"subject":     {Type: "string"},
				"status":      {Type: "enum", Values: []string{"open", "pending", "closed"}},
				"amount_eur":  {Type: "number"},
			},
		},
		Trace: true,
	}
	wantStore.History.Versions = 5
	if diff := cmp.Diff(map[string]*Store{"tickets": wantStore}, a.Stores); diff != "" {
		t.Errorf("Stores (-want +got):\n%s", diff)
	}

	wantUses := map[string]Uses{
		"triage":         {Tools: []string{"store__tickets__query", "store__tickets__set"}, Subagents: []string{"billing"}},
		"refund_request": {Tools: []string{"store__tickets__set"}},
	}
	gotUses := map[string]Uses{}
	for name, tool := range a.Tools {
		gotUses[name] = tool.Uses
	}
	if diff := cmp.Diff(wantUses, gotUses, opts); diff != "" {
		t.Errorf("tool uses (-want +got):\n%s", diff)
	}
	for name, durable := range map[string]bool{"triage": false, "refund_request": true} {
		tool := a.Tools[name]
		if tool.Durable() != durable || tool.Layout != LayoutHandler || tool.Name != name {
			t.Errorf("tool %s: Durable() = %v, Layout %q, Name %q; want %v, handler, %s", name, tool.Durable(), tool.Layout, tool.Name, durable, name)
		}
		wantPath := "svc/tools/" + name + "/handler.ts"
		if tool.SourcePath != wantPath || tool.Source != readFixtureFile(t, "support-desk", wantPath) {
			t.Errorf("tool %s: SourcePath %q or Source differs from %s", name, tool.SourcePath, wantPath)
		}
		if !strings.Contains(tool.JS, "sourceMappingURL=data:application/json;base64,") || !strings.Contains(tool.JS, "default: () =>") {
			t.Errorf("tool %s: JS lacks the inline source map or the default export:\n%s", name, tool.JS)
		}
		var schema map[string]any
		if err := json.Unmarshal(tool.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("tool %s: Parameters = %s (%v), want an object schema", name, tool.Parameters, err)
		}
	}

	wantEvals := map[string]*Eval{
		"refund-annual": {
			Name:        "refund-annual",
			Title:       "refund of an annual plan within 30 days",
			Description: "A customer on an annual plan bought 10 days ago asks for their money back.",
			Context:     map[string]string{"plan": "enterprise"},
			Query:       "I bought the annual plan ten days ago and want a refund.",
			Assertions: []Assertion{
				{Text: "Should load the refund-policy knowledge document"},
				{Text: "Should say that the refund is possible in full"},
				{Text: "Should NOT promise an amount before the refund_request tool returns", Negative: true},
			},
		},
		"no-monthly-refund": {
			Name:    "no-monthly-refund",
			Title:   "no refund for a monthly plan",
			Context: map[string]string{"plan": "team"},
			Query:   "Refund last month please, I did not use it.",
			Assertions: []Assertion{
				{Text: "Should say that monthly plans are not refundable"},
				{Text: "Should NOT call refund_request", Negative: true},
			},
		},
	}
	if diff := cmp.Diff(wantEvals, a.Evals); diff != "" {
		t.Errorf("Evals (-want +got):\n%s", diff)
	}

	wantConn := &Connection{
		Name: "status",
		Spec: ConnectionSpec{
			BaseURL:  "env:STATUS_API_URL",
			Format:   "rest",
			TestPath: "/health",
			Auth:     &ConnectionAuth{Headers: map[string]string{"Authorization": "env:STATUS_API_TOKEN"}},
		},
		Policy: &Policy{Endpoints: map[string]EndpointRule{
			"GET /incidents":                 {Returns: []string{"Incident"}, Confirm: "never", Reason: "List open incidents"},
			"GET /incidents/{id}":            {Returns: []string{"Incident"}, Confirm: "never", Reason: "Read one incident"},
			"POST /incidents/{id}/subscribe": {Returns: []string{"Subscription"}, Confirm: "always", Reason: "Subscribe the customer to updates"},
			"*":                              {Returns: []string{}, Confirm: "never", Reason: "Everything else is read-only"},
		}},
		Surface: readFixtureFile(t, "support-desk", "svc/connections/status/surface.md"),
	}
	if diff := cmp.Diff(map[string]*Connection{"status": wantConn}, a.Connections); diff != "" {
		t.Errorf("Connections (-want +got):\n%s", diff)
	}

	wantKnowledge := map[string]string{
		"plans":         "The plans Acme sells and what each includes.",
		"refund-policy": "When a refund is allowed, and how much.",
	}
	gotKnowledge := map[string]string{}
	for name, k := range a.Knowledge {
		gotKnowledge[name] = k.Description
		if !strings.HasPrefix(k.Body, "# ") || k.Name != name {
			t.Errorf("knowledge %s: Name %q, Body starts %q; want the markdown after the front matter", name, k.Name, k.Body[:min(len(k.Body), 20)])
		}
	}
	if diff := cmp.Diff(wantKnowledge, gotKnowledge); diff != "" {
		t.Errorf("knowledge descriptions (-want +got):\n%s", diff)
	}

	wantAgents := map[string]*NamedAgent{
		"default": {
			Name: "default", Tools: []string{"load_skill", "load_knowledge", "triage", "refund_request"},
			Skills: []string{"refunds"}, Connections: []string{"status"}, Stores: map[string]string{"tickets": "rw"},
			Instructions: readFixtureFile(t, "support-desk", "agents/default/AGENT.md"),
		},
		"billing": {
			Name: "billing", Tools: []string{"load_knowledge"}, Stores: map[string]string{"tickets": "r"},
			Instructions: readFixtureFile(t, "support-desk", "agents/billing/AGENT.md"),
		},
	}
	// notes-only has agent.json but no AGENT.md: it is not an agent.
	if diff := cmp.Diff(wantAgents, a.Agents, opts); diff != "" {
		t.Errorf("Agents (-want +got):\n%s", diff)
	}

	var wantFiles []string
	root := agenttest.Dir(t, "support-desk")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			wantFiles = append(wantFiles, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(wantFiles)
	gotFiles := sortedKeys(a.Files)
	if diff := cmp.Diff(wantFiles, gotFiles); diff != "" {
		t.Errorf("Files (-want +got):\n%s", diff)
	}
}

func readFixtureFile(tb testing.TB, fixture, name string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(agenttest.Dir(tb, fixture), filepath.FromSlash(name)))
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

// TestLoadFixtureFS checks that Load on an fs.FS gives the same agent as LoadDir.
func TestLoadFixtureFS(t *testing.T) {
	fromDir, ps := loadFixture(t, "support-desk")
	if ps != nil {
		t.Fatal(ps)
	}
	fromFS, err := Load(os.DirFS(agenttest.Dir(t, "support-desk")))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromDir, fromFS); diff != "" {
		t.Errorf("Load differs from LoadDir (-LoadDir +Load):\n%s", diff)
	}
}

func BenchmarkLoadSupportDesk(b *testing.B) {
	dir := agenttest.Dir(b, "support-desk")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadDir(dir); err != nil {
			b.Fatal(err)
		}
	}
}
