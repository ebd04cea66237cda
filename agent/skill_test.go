package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSkillProblems(t *testing.T) {
	skill := func(text string) map[string]string { return map[string]string{"svc/skills/s/SKILL.md": text} }
	const file = "svc/skills/s/SKILL.md"
	runTreeCases(t, []treeCase{
		{name: "valid", files: skill("# Skill: s\nTrigger: always\n")},
		{name: "no heading", files: skill("\n\nSkill s\nTrigger: x"),
			want: []Problem{{File: file, Line: 3, Message: `first line must be the heading "# Skill: <name>", got "Skill s"`}}},
		{name: "empty heading", files: skill("# Skill:  \nTrigger: x"),
			want: []Problem{{File: file, Line: 1, Message: `heading "# Skill:" names no skill`}}},
		{name: "empty file", files: skill(" \n"),
			want: []Problem{
				{File: file, Message: `missing a "Trigger: ..." line (after the heading, before the first "## " section) saying when the skill applies`},
				{File: file, Line: 1, Message: `empty file: a skill starts with the heading "# Skill: <name>"`},
			}},
		{name: "trigger inside a section", files: skill("# Skill: s\n## Behavior\nTrigger: too late\n"),
			want: []Problem{{File: file, Message: `missing a "Trigger: ..." line (after the heading, before the first "## " section) saying when the skill applies`}}},
		{name: "trigger only in a fence", files: skill("# Skill: s\n```\nTrigger: x\n```\n"),
			want: []Problem{{File: file, Message: `missing a "Trigger: ..." line (after the heading, before the first "## " section) saying when the skill applies`}}},
		{name: "empty trigger", files: skill("# Skill: s\nTrigger:\n"),
			want: []Problem{{File: file, Line: 2, Message: `"Trigger:" line is empty; say when the skill applies`}}},
		{name: "invalid name", files: skill("# Skill: money back\nTrigger: x\n"),
			want: []Problem{{File: file, Line: 1, Message: `invalid skill name "money back": use letters, digits, '_' and '-' (at most 64, starting with a letter or digit)`}}},
		{name: "duplicate section", files: skill("# Skill: s\nTrigger: x\n## A\none\n## A\ntwo\n"),
			want: []Problem{{File: file, Line: 5, Message: `duplicate section "## A"`}}},
		{name: "same name in two folders", files: map[string]string{
			"svc/skills/a/SKILL.md": "# Skill: s\nTrigger: x\n",
			"svc/skills/b/SKILL.md": "# Skill: s\nTrigger: y\n",
		}, want: []Problem{{File: "svc/skills/b/SKILL.md", Line: 1, Message: `skill "s" is also defined in svc/skills/a/SKILL.md`}}},
	})
}

func TestParseSkill(t *testing.T) {
	text := "\n# Skill: refunds \nTrigger:  money back \n\n## Behavior\n1. Load.\n```\n## not a section\n```\n\n## Constraints\n- Never.\n"
	var c collector
	got := parseSkill("SKILL.md", "dir", []byte(text), &c)
	want := &Skill{
		Name: "refunds", Dir: "dir", Trigger: "money back", Body: text,
		Sections: map[string]string{"Behavior": "1. Load.\n```\n## not a section\n```", "Constraints": "- Never."},
	}
	if diff := cmp.Diff(want, got); diff != "" || c.problems != nil {
		t.Errorf("parseSkill (-want +got):\n%s\nproblems: %v", diff, c.problems)
	}
}
