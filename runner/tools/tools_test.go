package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/sse"
	"svc/runner/tools"
)

func load(t *testing.T, name string) *agent.Agent {
	t.Helper()
	ag, err := agent.LoadDir(agenttest.Dir(t, name))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return ag
}

// recorder is a tools.Host that keeps what tools did.
type recorder struct {
	mu        sync.Mutex
	frames    []sse.Frame
	skills    []string
	knowledge []string
}

func (r *recorder) Emit(f *sse.Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, *f)
	return nil
}
func (r *recorder) ActivateSkill(name string) {
	r.mu.Lock()
	r.skills = append(r.skills, name)
	r.mu.Unlock()
}
func (r *recorder) NoteKnowledge(name string) {
	r.mu.Lock()
	r.knowledge = append(r.knowledge, name)
	r.mu.Unlock()
}

func TestForAgent(t *testing.T) {
	desk := load(t, "support-desk")
	hello := load(t, "hello")
	cases := []struct {
		name      string
		ag        *agent.Agent
		named     string
		tools     []string
		knowledge int
		skills    int
		omitted   []string
	}{
		{"desk default", desk, "default", []string{"load_skill", "load_knowledge", "handoff"}, 2, 1,
			[]string{"composite tool triage", "durable tool refund_request", "connection status", "store tickets"}},
		{"desk billing", desk, "billing", []string{"load_knowledge", "handoff"}, 2, 0, []string{"store tickets"}},
		{"desk unscoped", desk, "", []string{"load_skill", "load_knowledge", "handoff"}, 2, 1,
			[]string{"durable tool refund_request", "composite tool triage", "connection status", "store tickets"}},
		{"hello default", hello, "default", nil, 0, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var named *agent.NamedAgent
			if c.named != "" {
				named = c.ag.Agents[c.named]
			}
			sel := tools.ForAgent(c.ag, named, tools.Extensions{})
			if d := cmp.Diff(c.tools, sel.Set.Names()); d != "" {
				t.Errorf("tools (-want +got):\n%s", d)
			}
			if len(sel.Knowledge) != c.knowledge || len(sel.Skills) != c.skills {
				t.Errorf("knowledge %d, skills %d; want %d, %d", len(sel.Knowledge), len(sel.Skills), c.knowledge, c.skills)
			}
			if d := cmp.Diff(c.omitted, sel.Omitted); d != "" {
				t.Errorf("omitted (-want +got):\n%s", d)
			}
			for _, sp := range sel.Set.Specs() {
				if !json.Valid(sp.Parameters) {
					t.Errorf("%s: parameters are not JSON", sp.Name)
				}
			}
		})
	}
}

func TestLoadKnowledge(t *testing.T) {
	desk := load(t, "support-desk")
	lk := tools.NewLoadKnowledge(desk.Knowledge)
	rec := &recorder{}
	res, err := lk.Call(context.Background(), tools.Call{ID: "c1", Arguments: json.RawMessage(`{"name":"plans"}`), Host: rec})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Content, "| starter |") || strings.Contains(res.Content, "description:") {
		t.Errorf("content = %q, want the body without front matter", res.Content)
	}
	if d := cmp.Diff([]string{"plans"}, rec.knowledge); d != "" {
		t.Errorf("noted (-want +got):\n%s", d)
	}
	running, completed := lk.Labels(json.RawMessage(`{"name":"plans"}`))
	if running != "Reading plans" || completed != "Read plans" {
		t.Errorf("labels = %q, %q", running, completed)
	}
	for _, args := range []string{`{"name":"nope"}`, `{}`, `[1]`, `"x"`} {
		if _, err := lk.Call(context.Background(), tools.Call{Arguments: json.RawMessage(args), Host: rec}); !errors.Is(err, tools.ErrBadArguments) {
			t.Errorf("Call(%s) err = %v, want ErrBadArguments", args, err)
		}
	}
}

func TestLoadSkill(t *testing.T) {
	desk := load(t, "support-desk")
	ls := tools.NewLoadSkill(desk.Skills)
	rec := &recorder{}
	res, err := ls.Call(context.Background(), tools.Call{ID: "c1", Arguments: json.RawMessage(`{"name":"refunds"}`), Host: rec})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Content, "# Skill: refunds") {
		t.Errorf("content = %q", res.Content)
	}
	if d := cmp.Diff([]string{"refunds"}, rec.skills); d != "" {
		t.Errorf("activated (-want +got):\n%s", d)
	}
	if len(rec.frames) != 1 || rec.frames[0].Type != sse.TypeSkillActivated || rec.frames[0].SkillName != "refunds" {
		t.Errorf("frames = %+v, want one skill_activated", rec.frames)
	}
	if _, err := ls.Call(context.Background(), tools.Call{Arguments: json.RawMessage(`{"name":"other"}`), Host: rec}); !errors.Is(err, tools.ErrBadArguments) {
		t.Errorf("unknown skill err = %v", err)
	}
}

func TestSetReplacesDuplicates(t *testing.T) {
	desk := load(t, "support-desk")
	a := tools.NewLoadKnowledge(desk.Knowledge)
	b := tools.NewLoadKnowledge(nil)
	s := tools.NewSet(a, tools.NewLoadSkill(desk.Skills), b)
	if d := cmp.Diff([]string{"load_knowledge", "load_skill"}, s.Names()); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	if got, _ := s.Get("load_knowledge"); got != tools.Tool(b) {
		t.Error("later tool does not replace the earlier one")
	}
	var nilSet *tools.Set
	if nilSet.Len() != 0 || nilSet.Specs() != nil {
		t.Error("nil set is not empty")
	}
}

// TestPlainHandlerToolIsNamedSo: a tool of svc/tools that calls nothing is left out as a
// handler tool, not as a composite one.
func TestPlainHandlerToolIsNamedSo(t *testing.T) {
	ag, err := agent.Load(fstest.MapFS{
		"svc.json":                   {Data: []byte(`{"name": "t", "version": "1"}`)},
		"agents/default/AGENT.md":    {Data: []byte("Be brief.")},
		"agents/default/agent.json":  {Data: []byte(`{"name": "default", "tools": ["plain"]}`)},
		"svc/tools/plain/tool.json":  {Data: []byte(`{"name": "plain", "description": "d", "parameters": {"type": "object", "properties": {}}}`)},
		"svc/tools/plain/handler.ts": {Data: []byte("export default async function (params: any) { return 1; }\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	sel := tools.ForAgent(ag, ag.Agents["default"], tools.Extensions{})
	if d := cmp.Diff([]string{"handler tool plain"}, sel.Omitted); d != "" {
		t.Errorf("omitted (-want +got):\n%s", d)
	}
}

func TestAskUserArguments(t *testing.T) {
	ask := tools.NewAskUser()
	many := make([]map[string]string, 21)
	for i := range many {
		many[i] = map[string]string{"value": strings.Repeat("v", i+1), "label": "L"}
	}
	manyJSON, _ := json.Marshal(map[string]any{"question": "Q", "options": many})
	for _, c := range []struct{ args, want string }{
		{`{"options": [{"value": "a", "label": "A"}]}`, `"question" is required`},
		{`{"question": "Q"}`, `"options" needs at least one`},
		{string(manyJSON), `"options" has 21 entries; at most 20`},
		{`{"question": "Q", "options": [{"value": "", "label": "A"}]}`, `"options[0].value" is required`},
		{`{"question": "Q", "options": [{"value": "a"}]}`, `"options[0].label" is required`},
		{`{"question": "Q", "options": [{"value": "a", "label": "A"}, {"value": "a", "label": "B"}]}`, `"options[1].value" "a" repeats`},
		{`{"question": "Q", "options": [{"value": "a", "label": "A"}], "colour": 1}`, `unknown field "colour"`},
	} {
		_, err := ask.Call(context.Background(), tools.Call{Arguments: json.RawMessage(c.args)})
		if !errors.Is(err, tools.ErrBadArguments) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.args, err, c.want)
		}
	}
	res, err := ask.Call(context.Background(), tools.Call{Arguments: json.RawMessage(`{"question": "Q", "options": [{"value": "a", "label": "A"}]}`)})
	if err != nil || !res.EndRun {
		t.Errorf("a good question: %+v, %v; want a result that ends the run", res, err)
	}
}
