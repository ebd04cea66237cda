package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEvalProblems(t *testing.T) {
	eval := func(text string) map[string]string { return map[string]string{"evals/e.md": text} }
	const file = "evals/e.md"
	runTreeCases(t, []treeCase{
		{name: "valid", files: eval("# Eval: t\n## Query\n\"hi\"\n## Assertions\n- Should greet\n")},
		{name: "no heading", files: eval("Eval t\n## Query\n\"hi\"\n## Assertions\n- Should greet\n"),
			want: []Problem{{File: file, Line: 1, Message: `first line must be the heading "# Eval: <title>", got "Eval t"`}}},
		{name: "empty title", files: eval("# Eval:\n## Query\n\"hi\"\n## Assertions\n- Should greet\n"),
			want: []Problem{{File: file, Line: 1, Message: `heading "# Eval:" has no title`}}},
		{name: "empty file", files: eval(""),
			want: []Problem{{File: file, Line: 1, Message: `empty file: an eval starts with the heading "# Eval: <title>"`}}},
		{name: "missing sections", files: eval("# Eval: t\nJust a description.\n## Notes\nx\n"),
			want: []Problem{
				{File: file, Message: `missing section "## Query" with the quoted user message`},
				{File: file, Message: `missing section "## Assertions" with a bullet list`},
			}},
		{name: "unquoted query", files: eval("# Eval: t\n## Query\nhi\n## Assertions\n- Should greet\n"),
			want: []Problem{{File: file, Line: 2, Message: `"## Query" must hold the user message in double quotes, e.g. "Where is my order?"`}}},
		{name: "empty query", files: eval("# Eval: t\n## Query\n\"\"\n## Assertions\n- Should greet\n"),
			want: []Problem{{File: file, Line: 2, Message: `"## Query" holds an empty message`}}},
		{name: "bad assertions", files: eval("# Eval: t\n## Query\n\"hi\"\n## Assertions\nShould greet\n- \n"),
			want: []Problem{
				{File: file, Line: 4, Message: `"## Assertions" has no bullet`},
				{File: file, Line: 5, Message: `assertions are bullets ("- Should ..."), got "Should greet"`},
				{File: file, Line: 6, Message: "empty assertion"},
			}},
		{name: "bad context", files: eval("# Eval: t\n## Setup\nContext: a=1, b, =2, a=3\nContext: c=1\n## Query\n\"hi\"\n## Assertions\n- Should greet\n"),
			want: []Problem{
				{File: file, Line: 3, Message: `"Context:" entries must be key=value, got "b"`},
				{File: file, Line: 3, Message: `"Context:" entries must be key=value, got "=2"`},
				{File: file, Line: 3, Message: `"Context:" sets "a" twice`},
				{File: file, Line: 4, Message: `more than one "Context:" line`},
			}},
		{name: "allow writes", files: eval("# Eval: t\n## Setup\nAllow writes: ghost, ghost, *\nallow writes: x\n## Query\n\"hi\"\n## Assertions\n- Should greet\n"),
			want: []Problem{
				{File: file, Message: `"Allow writes:" names "ghost", which is not a connection (no folder svc/connections/ghost)`},
				{File: file, Line: 3, Message: `"Allow writes:" lists "ghost" twice`},
				{File: file, Line: 4, Message: `more than one "Allow writes:" line`},
			}},
		{name: "duplicate section", files: eval("# Eval: t\n## Query\n\"hi\"\n## query\n\"again\"\n## Assertions\n- Should greet\n"),
			want: []Problem{{File: file, Line: 4, Message: `duplicate section "## query"`}}},
	})
}

func TestParseEval(t *testing.T) {
	text := "# Eval: refund\r\n\r\nA customer asks.\r\nTwice.\r\n\r\n## Setup\r\nSome words.\r\nContext: plan=team, region = eu ,empty=\r\n\r\n## Query\r\n\"Line one,\r\nline \"two\".\"\r\n\r\n## Assertions\r\n- Should answer\r\n  in full\r\n* should not refund\r\n- Should NOT\r\n- Shouldnotice things\r\n## Notes\r\n- ignored\r\n"
	var c collector
	got := parseEval("e.md", "e", []byte(text), &c)
	want := &Eval{
		Name: "e", Title: "refund", Description: "A customer asks.\nTwice.",
		Context: map[string]string{"plan": "team", "region": "eu", "empty": ""},
		Query:   "Line one,\nline \"two\".",
		Assertions: []Assertion{
			{Text: "Should answer in full"},
			{Text: "should not refund", Negative: true},
			{Text: "Should NOT", Negative: true},
			{Text: "Shouldnotice things"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" || c.problems != nil {
		t.Errorf("parseEval (-want +got):\n%s\nproblems: %v", diff, c.problems)
	}
}
