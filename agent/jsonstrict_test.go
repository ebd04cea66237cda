package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeJSONStrict(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type target struct {
		S   string            `json:"s"`
		F   float64           `json:"f"`
		B   bool              `json:"b"`
		L   []string          `json:"l"`
		M   map[string]inner  `json:"m"`
		P   *inner            `json:"p"`
		Raw json.RawMessage   `json:"raw"`
		Opt map[string]string `json:"opt"`
		Ign string            `json:"-"`
	}
	tests := []struct {
		name   string
		input  string
		want   target
		issues []lineIssue
		lines  map[string]int
	}{
		{
			name:  "all kinds",
			input: "\ufeff{\n\"s\": \"x\", \"f\": 1.5,\n\"b\": true, \"l\": [\"a\",\n \"b\"],\n\"m\": {\"k\": {\"n\": 2}}, \"p\": {\"n\": 3},\n\"raw\": {\"type\": \"object\",\n \"x\": [1, 2]}, \"opt\": null\n}",
			want: target{S: "x", F: 1.5, B: true, L: []string{"a", "b"}, M: map[string]inner{"k": {N: 2}}, P: &inner{N: 3},
				Raw: json.RawMessage("{\"type\": \"object\",\n \"x\": [1, 2]}")},
			lines: map[string]int{"s": 2, "f": 2, "b": 3, "l": 3, "l[0]": 3, "l[1]": 4, "m": 5, "m.k": 5, "m.k.n": 5, "p": 5, "p.n": 5, "raw": 6, "raw.type": 6, "raw.x": 7, "raw.x[0]": 7, "raw.x[1]": 7, "opt": 7}, // raw JSON too, for the problems found in it later
		},
		{
			name:   "ignored field is unknown",
			input:  `{"Ign": "x", "-": 1}`,
			issues: []lineIssue{{line: 1, message: `unknown field "Ign"`}, {line: 1, message: `unknown field "-"`}},
			lines:  map[string]int{},
		},
		{
			name:  "nulls for scalars are type errors",
			input: "{\"s\": null,\n\"b\": null, \"p\": null, \"l\": null}",
			issues: []lineIssue{
				{line: 1, message: `field "s" must be a string, got null`},
				{line: 2, message: `field "b" must be a boolean, got null`},
			},
			lines: map[string]int{"s": 1, "b": 2, "p": 2, "l": 2},
		},
		{
			name:   "integer overflow",
			input:  `{"m": {"k": {"n": 99999999999999999999}}}`,
			want:   target{M: map[string]inner{"k": {}}},
			issues: []lineIssue{{line: 1, message: `field "m.k.n" must be an integer, got 99999999999999999999`}},
			lines:  map[string]int{"m": 1, "m.k": 1, "m.k.n": 1},
		},
		{
			name:   "duplicate map key",
			input:  "{\"m\": {\"k\": {}, \n\"k\": {}}}",
			want:   target{M: map[string]inner{"k": {}}},
			issues: []lineIssue{{line: 2, message: `duplicate key "m.k"`}},
			lines:  map[string]int{"m": 1, "m.k": 1},
		},
		{
			name:   "invalid UTF-8",
			input:  "{\"s\": \"\xff\"}",
			issues: []lineIssue{{message: "not valid UTF-8"}},
			lines:  map[string]int{},
		},
		{
			name:   "too deep",
			input:  `{"raw": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
			issues: []lineIssue{{line: 1, message: "invalid JSON: nested deeper than 100 levels"}},
			lines:  map[string]int{},
		},
		{
			name:   "key not a string",
			input:  `{1: 2}`,
			issues: []lineIssue{{line: 1, message: "invalid JSON: invalid character '1'"}},
			lines:  map[string]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got target
			doc, issues := decodeJSONStrict([]byte(tt.input), &got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.issues, issues, cmp.AllowUnexported(lineIssue{})); diff != "" {
				t.Errorf("issues (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.lines, doc.lines); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLineIndex(t *testing.T) {
	idx := newLineIndex([]byte("ab\ncd\n\nx"))
	for offset, want := range map[int64]int{0: 1, 2: 1, 3: 2, 5: 2, 6: 3, 7: 4, 100: 4} {
		if got := idx.line(offset); got != want {
			t.Errorf("line(%d) = %d, want %d", offset, got, want)
		}
	}
}
