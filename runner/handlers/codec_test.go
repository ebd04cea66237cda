package handlers

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/durable"
)

// codecCases are messages of every kind, with every field set somewhere.
var codecCases = map[string]message{
	"empty": {},
	"call": {Op: opCall, Loan: 1 << 40, Call: &callSpec{
		Tool: "triage", Digest: "abc", SourcePath: "svc/tools/triage/handler.ts", Layout: "handler",
		UsesTools: []string{"store__tickets__query", ""}, UsesAgents: []string{"billing"}, Children: true, Subagents: true,
		MaxResultBytes: 1 << 20, MaxLogLines: 100, MaxLogBytes: -4096, MaxDepth: 4, Depth: 2,
		ID: "call_1.2", SessionID: "s1", Args: json.RawMessage(`{"customer_id": "c1"}`),
		Files:   []fileInfo{{Filename: "a.pdf", MimeType: "application/pdf", Delivery: "inline", Size: 12345}, {}},
		Durable: true, Recorded: map[string]json.RawMessage{"step:a#1": json.RawMessage(`1`), "": json.RawMessage(`"x"`), "tool:t#1": nil},
	}},
	"js":     {Op: opJS, Digest: "abc", JS: "export default () => 1;\n"},
	"rpc":    {Op: opRPC, Seq: 3, Method: rpcCallSubagent, Name: "billing", Task: "Is it money?", Args: json.RawMessage(`{"a":[1,2]}`), Files: []string{"a.pdf", ""}},
	"reply":  {Op: opReply, Seq: 3, Value: json.RawMessage(`{"key":"c1-0","version":1}`)},
	"stop":   {Op: opReply, Seq: 4, Error: "record the journal: gone", Stop: true},
	"emit":   {Op: opEmit, Frame: &emitFrame{Type: "tool_log", Message: "héllo\x00", RunningLabel: "r", CompletedLabel: "c"}},
	"widget": {Op: opEmit, Frame: &emitFrame{Type: "widget", WidgetType: "chart", Data: json.RawMessage(`{"points":[1,2]}`)}},
	"record": {Op: opRecord, Key: "step:s#1", Value: json.RawMessage(`[true]`)},
	"done":   {Op: opDone, Outcome: &outcome{Content: `{"n":2}`, Data: json.RawMessage(`{"n":2}`)}},
	"pause": {Op: opDone, Outcome: &outcome{Pause: &durable.Pause{Key: "input:approve#1", Kind: "approval", Question: "Refund?",
		EligibleAnswerers: []string{"finance-lead"}}}},
	"error":  {Op: opDone, Outcome: &outcome{Err: &wireError{Kind: errThrew, Message: "boom", Tool: "x", File: "svc/tools/x/handler.ts", Line: 7, Column: -1}}},
	"cancel": {Op: opCancel, Loan: 7},
}

// Every message decodes to itself.
func TestCodecRoundTrip(t *testing.T) {
	for name, m := range codecCases {
		t.Run(name, func(t *testing.T) {
			got, err := decodeMessage(m.encode(nil))
			if err != nil {
				t.Fatalf("decodeMessage: %v", err)
			}
			if diff := cmp.Diff(m, got, cmp.Comparer(rawEqual)); diff != "" {
				t.Errorf("decoded message (-want +got):\n%s", diff)
			}
		})
	}
}

// A frame cut anywhere decodes to an error or to a message with fewer fields, never to a panic;
// unknown fields and values longer than the frame are refused.
func TestCodecRefusesBadFrames(t *testing.T) {
	for _, m := range codecCases {
		b := m.encode(nil)
		for i := range b {
			_, _ = decodeMessage(b[:i]) // must not panic
		}
	}
	for name, b := range map[string][]byte{
		"unknown field":         {99, 1},
		"value past the end":    {tagOp, 5, 'c', 'a'},
		"number cut short":      {tagSeq, 0x80},
		"unknown nested field":  {tagFrame, 2, 9, 0},
		"nested past its frame": {tagOutcome, 3, 1, 5, 'x'},
		"pause not JSON":        {tagOutcome, 3, 3, 1, '{'},
	} {
		if _, err := decodeMessage(b); !errors.Is(err, errBadFrame) {
			t.Errorf("%s: decodeMessage = %v, want errBadFrame", name, err)
		}
	}
}

// The runner decodes what workers send: no input makes the decoder panic, and what it accepts
// encodes and decodes to itself.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range codecCases {
		f.Add(m.encode(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			return
		}
		again, err := decodeMessage(m.encode(nil))
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if diff := cmp.Diff(m, again, cmp.Comparer(rawEqual)); diff != "" {
			t.Errorf("re-decoded message (-first +second):\n%s", diff)
		}
	})
}

// rawEqual compares raw values as the codec keeps them: an empty value is left out.
func rawEqual(a, b json.RawMessage) bool { return string(a) == string(b) }

// BenchmarkCodecReply is one reply, encoded then decoded: twice a crossing.
func BenchmarkCodecReply(b *testing.B) {
	m := codecCases["reply"]
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = m.encode(buf[:0])
		if _, err := decodeMessage(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCodecCall is the call frame of the triage handler, encoded then decoded.
func BenchmarkCodecCall(b *testing.B) {
	m := message{Op: opCall, Loan: 4, Call: &callSpec{Tool: "triage", Digest: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		SourcePath: "svc/tools/triage/handler.ts", UsesTools: []string{"store__tickets__query", "store__tickets__set"}, UsesAgents: []string{"billing"},
		Children: true, Subagents: true, MaxResultBytes: 1 << 20, MaxLogLines: 100, MaxLogBytes: 4096, MaxDepth: 4, Depth: 1, ID: "c",
		Args: json.RawMessage(`{"customer_id": "c1", "subject": "refund please"}`)}}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = m.encode(buf[:0])
		if _, err := decodeMessage(buf); err != nil {
			b.Fatal(err)
		}
	}
}
