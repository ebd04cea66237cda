package evals

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseVerdicts(t *testing.T) {
	const n = 2
	tests := []struct {
		name   string
		answer string
		want   []Status
		reason string // a substring of every error reason
	}{
		{"both", `{"verdicts":[{"index":1,"pass":true,"reason":"a"},{"index":2,"pass":false,"reason":"b"}]}`, []Status{StatusPass, StatusFail}, ""},
		{"any order", `{"verdicts":[{"index":2,"pass":true},{"index":1,"pass":true}]}`, []Status{StatusPass, StatusPass}, ""},
		{"fenced", "```json\n{\"verdicts\":[{\"index\":1,\"pass\":true},{\"index\":2,\"pass\":true}]}\n```", []Status{StatusPass, StatusPass}, ""},
		{"not JSON", `Both hold.`, []Status{StatusError, StatusError}, "not the JSON object"},
		{"text after", `{"verdicts":[{"index":1,"pass":true},{"index":2,"pass":true}]} Done.`, []Status{StatusError, StatusError}, "text after"},
		{"no verdicts", `{}`, []Status{StatusError, StatusError}, `no "verdicts"`},
		{"unknown field", `{"verdicts":[{"index":1,"pass":true,"score":3},{"index":2,"pass":true}]}`, []Status{StatusError, StatusError}, "unknown field"},
		{"extra index", `{"verdicts":[{"index":1,"pass":true},{"index":2,"pass":true},{"index":3,"pass":true}]}`, []Status{StatusError, StatusError}, "index 3 is not an assertion"},
		{"index twice", `{"verdicts":[{"index":1,"pass":true},{"index":1,"pass":false}]}`, []Status{StatusError, StatusError}, "given twice"},
		{"no index", `{"verdicts":[{"pass":true},{"index":2,"pass":true}]}`, []Status{StatusError, StatusError}, "no index"},
		{"index not a number", `{"verdicts":[{"index":"1","pass":true}]}`, []Status{StatusError, StatusError}, "not the JSON object"},
		{"missing index", `{"verdicts":[{"index":2,"pass":true}]}`, []Status{StatusError, StatusPass}, "no verdict for index 1"},
		{"pass a string", `{"verdicts":[{"index":1,"pass":"yes"},{"index":2,"pass":false}]}`, []Status{StatusError, StatusFail}, `pass of index 1 is "yes"`},
		{"pass missing", `{"verdicts":[{"index":1},{"index":2,"pass":true}]}`, []Status{StatusError, StatusPass}, "pass of index 1 is missing"},
		{"pass null", `{"verdicts":[{"index":1,"pass":null},{"index":2,"pass":true}]}`, []Status{StatusError, StatusPass}, "pass of index 1 is null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseVerdicts(tt.answer, n)
			statuses := make([]Status, len(got))
			for i, v := range got {
				statuses[i] = v.status
				if v.status == StatusError && !strings.Contains(v.reason, tt.reason) {
					t.Errorf("verdict %d reason %q, want it to contain %q", i+1, v.reason, tt.reason)
				}
			}
			if diff := cmp.Diff(tt.want, statuses); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJudgePrompt(t *testing.T) {
	tr := decode(append(call("1", "refund_request", `{"plan":"annual"}`),
		call("2", "store__tickets__set", `{"id":"t1"}`)...))
	tr.Text = "Refunded in full."
	tr.DoneReason = "complete"
	tr.ToolCalls[1].Status, tr.ToolCalls[1].Error = "error", "store is read-only"
	got := judgePrompt("Refund me", &tr, []string{"Should be polite", "Should NOT promise an amount"})
	for _, s := range []string{
		"## User message\nRefund me",
		`1. refund_request parameters={"plan":"annual"} status=success result={}`,
		"2. store__tickets__set parameters={\"id\":\"t1\"} status=error error=store is read-only",
		"## Turn ended with\ncomplete",
		"## Answer text\nRefunded in full.",
		"1. Should be polite\n2. Should NOT promise an amount\n",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("prompt lacks %q:\n%s", s, got)
		}
	}
	if long := clip(strings.Repeat("x", maxJudgeField+10)); len(long) > maxJudgeField+len("…(truncated)") {
		t.Errorf("clip left %d bytes", len(long))
	}
}
