package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// The seed corpora live in testdata/fuzz/<FuzzName>; the f.Add calls below keep the basics
// in the source. Run one target with: go test -run '^$' -fuzz '^FuzzSkill$' -fuzztime 15s ./agent

// checkProblems fails when problems are unsorted, unnamed or point past the last line.
func checkProblems(t *testing.T, ps Problems, text string) {
	t.Helper()
	lines := strings.Count(text, "\n") + 1
	for i, p := range ps {
		if p.File == "" || p.Message == "" || p.Line < 0 || p.Line > lines {
			t.Fatalf("bad problem %+v (text has %d lines)", p, lines)
		}
		if i > 0 && (ps[i-1].File > p.File || ps[i-1].File == p.File && ps[i-1].Line > p.Line) {
			t.Fatalf("problems not sorted: %v before %v", ps[i-1], p)
		}
	}
}

func FuzzLoadSvcJSON(f *testing.F) {
	f.Add([]byte(`{"name": "t", "version": "1"}`))
	f.Add([]byte(`{"name": "t", "version": "1", "models": {"main": {"provider": "openai-compatible", "model": "m", "baseUrl": "env:B"}}}`))
	f.Add([]byte("{\n\"ci\": {\"deploy\": {\"branches\": [\"[\"]}}, \"colour\": 1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := baseTree(nil)
		fsys["svc.json"] = &fstest.MapFile{Data: data}
		a, err := Load(fsys)
		if a == nil {
			t.Fatal("Load returned no agent")
		}
		if err == nil {
			if a.Config.Name == "" || a.Config.Version == "" {
				t.Fatalf("valid svc.json without name or version: %+v", a.Config)
			}
			return
		}
		var ps Problems
		if !errors.As(err, &ps) || len(ps) == 0 {
			t.Fatalf("error %v is not a non-empty Problems", err)
		}
		checkProblems(t, ps, string(data))
	})
}

func FuzzSkill(f *testing.F) {
	f.Add("# Skill: refunds\nTrigger: money\n\n## Behavior\n1. Do.\n")
	f.Add("Skill without the heading line.\nTrigger: never\n")
	f.Add("# Skill: s\n```\nTrigger: x\n## y\n```\n")
	f.Fuzz(func(t *testing.T, text string) {
		var c collector
		s := parseSkill("SKILL.md", "d", []byte(text), &c)
		c.problems.sort()
		checkProblems(t, c.problems, text)
		if s != nil && s.Name == "" {
			t.Fatal("skill without a name")
		}
		if c.problems == nil && (s == nil || s.Trigger == "" || checkName("skill", s.Name) != "") {
			t.Fatalf("no problems but skill %+v", s)
		}
	})
}

func FuzzEval(f *testing.F) {
	f.Add("# Eval: t\n\nd\n## Setup\nContext: plan=team, a=b\n## Query\n\"hi\"\n## Assertions\n- Should greet\n- Should NOT shout\n")
	f.Add("# Eval: t\n## Query\n\"\n## Assertions\n-\n")
	f.Add("# Eval:\n## Setup\nContext: =, a\n")
	f.Fuzz(func(t *testing.T, text string) {
		var c collector
		e := parseEval("e.md", "e", []byte(text), &c)
		c.problems.sort()
		checkProblems(t, c.problems, text)
		if c.problems == nil && (e.Title == "" || e.Query == "" || len(e.Assertions) == 0) {
			t.Fatalf("no problems but eval %+v", e)
		}
		if slices.ContainsFunc(e.Assertions, func(a Assertion) bool { return a.Text == "" }) {
			t.Fatalf("empty assertion in %+v", e.Assertions)
		}
	})
}

func FuzzFrontMatter(f *testing.F) {
	f.Add("---\ndescription: The plans.\n---\n# Plans\n")
	f.Add("---\ndescription: 'it''s'\n---\n")
	f.Add("---\ndescription: \"\\u00e9\"\n---")
	f.Add("---\ndescription: |\n---\n")
	f.Fuzz(func(t *testing.T, text string) {
		fields, body, problems := parseFrontMatter(text)
		if problems != nil {
			return
		}
		if !strings.HasSuffix(text, body) {
			t.Fatalf("body %q is not the end of the text", body)
		}
		for k := range fields {
			if !isFrontMatterField(k) {
				t.Fatalf("unknown field %q accepted", k)
			}
		}
		var c collector
		k := parseKnowledge("k.md", "k", []byte(text), &c)
		c.problems.sort()
		checkProblems(t, c.problems, text)
		if c.problems == nil && strings.TrimSpace(k.Description) == "" {
			t.Fatal("knowledge without description accepted")
		}
	})
}
