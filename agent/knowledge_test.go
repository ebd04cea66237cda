package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKnowledgeProblems(t *testing.T) {
	doc := func(text string) map[string]string { return map[string]string{"svc/knowledge/k.md": text} }
	const file = "svc/knowledge/k.md"
	runTreeCases(t, []treeCase{
		{name: "valid", files: doc("---\ndescription: Plans.\n---\n# Plans\n")},
		{name: "no front matter", files: doc("# Plans\n"),
			want: []Problem{{File: file, Line: 1, Message: `missing front matter: the file must start with "---", a "description: ..." line and "---"`}}},
		{name: "not closed", files: doc("---\ndescription: x\n# Plans\n"),
			want: []Problem{{File: file, Line: 1, Message: `front matter is not closed by a "---" line`}}},
		{name: "no description", files: doc("---\n---\nbody"),
			want: []Problem{{File: file, Line: 1, Message: `missing front matter field "description"`}}},
		{name: "empty description", files: doc("---\ndescription: \"\"\n---\nbody"),
			want: []Problem{{File: file, Line: 1, Message: `missing front matter field "description"`}}},
		{name: "bad lines", files: doc("---\ndescription: d\ntitle: t\nno colon here\ndescription: again\n  indented: x\n---\n"),
			want: []Problem{
				{File: file, Line: 3, Message: `unknown front matter field "title"`},
				{File: file, Line: 4, Message: `front matter line must be "key: value", got "no colon here"`},
				{File: file, Line: 5, Message: `duplicate front matter field "description"`},
				{File: file, Line: 6, Message: `front matter line must be "key: value", got "indented: x"`},
			}},
		{name: "block scalar", files: doc("---\ndescription: |\n  long\n---\n"),
			want: []Problem{
				{File: file, Line: 2, Message: `front matter field "description": must be on one line`},
				{File: file, Line: 3, Message: `front matter line must be "key: value", got "long"`},
			}},
	})
}

func TestParseFrontMatter(t *testing.T) {
	tests := []struct {
		name, text, description, body string
	}{
		{"plain", "---\ndescription: When a refund is allowed.\n---\n# Refunds\n", "When a refund is allowed.", "# Refunds\n"},
		{"double quoted", "---\ndescription: \"a: b \\\"c\\\"\"\n---\n", `a: b "c"`, ""},
		{"single quoted", "---\ndescription: 'it''s'\n---\nx", "it's", "x"},
		{"comments and blanks", "---\n# a comment\n\ndescription: d  \n---  \nbody\nmore", "d", "body\nmore"},
		{"CRLF", "---\r\ndescription: d\r\n---\r\nbody\r\n", "d", "body\n"},
		{"BOM", "\ufeff---\ndescription: d\n---\n", "d", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c collector
			k := parseKnowledge("k.md", "k", []byte(tt.text), &c)
			want := &Knowledge{Name: "k", Description: tt.description, Body: tt.body}
			if diff := cmp.Diff(want, k); diff != "" || c.problems != nil {
				t.Errorf("parseKnowledge (-want +got):\n%s\nproblems: %v", diff, c.problems)
			}
		})
	}
}
