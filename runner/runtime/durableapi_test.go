package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/durable/engine"
	"svc/runner/runtime"
)

// answerHandler parks at the pause its input names (text, yesno, choice or approval) and returns
// what the answer gave it.
const answerHandler = `export default async function (p: any, ctx: any) {
  if (p.kind === "approval") return await ctx.waitForApproval("ship it?");
  const options = p.kind === "choice" ? [{value: "a", label: "A"}, {value: "b", label: "B"}] : undefined;
  return await ctx.requestInput({question: "which?", inputType: p.kind, options});
}`

// The value of an answer must fit its pause (CONTRACT §6): yesno takes a boolean, text a
// string, choice one of the options' values or a non-empty list of them, an approval a boolean
// or {approved, note?}. null is none of them; it is refused like a missing value, 400 naming
// the field, and the run stays parked. A fitting value reaches the handler as it was sent.
func TestDurableAnswerValues(t *testing.T) {
	e := start(t, runtime.Options{Agent: durableAgent(t, answerHandler), Durable: durableEngine(t, engine.Config{})})
	const none = "(none)" // no value field at all
	cases := []struct {
		kind string
		bad  []string
		good map[string]string // value -> what the handler returns
	}{
		{"text", []string{none, `null`, `5`, `true`, `["x"]`, `{"value":"x"}`}, map[string]string{
			`"hello"`: `{"respondedBy":"service","value":"hello"}`,
			`""`:      `{"respondedBy":"service","value":""}`,
		}},
		{"yesno", []string{none, `null`, `"true"`, `1`, `0`, `"yes"`, `[true]`}, map[string]string{
			`true`:  `{"respondedBy":"service","value":true}`,
			`false`: `{"respondedBy":"service","value":false}`,
		}},
		{"choice", []string{none, `null`, `"c"`, `[]`, `[null]`, `["a","c"]`, `true`}, map[string]string{
			`"a"`:       `{"respondedBy":"service","value":"a"}`,
			`["a","b"]`: `{"respondedBy":"service","value":["a","b"]}`,
		}},
		{"approval", []string{none, `null`, `"true"`, `1`, `{}`, `{"approved":null}`, `{"approved":"yes"}`, `{"note":"x"}`,
			`{"approved":true,"note":null}`, `{"approved":true,"note":5}`, `{"approved":true,"by":"x"}`}, map[string]string{
			`true`:                            `{"approved":true,"respondedBy":"service"}`,
			`false`:                           `{"approved":false,"respondedBy":"service"}`,
			`{"approved":false}`:              `{"approved":false,"respondedBy":"service"}`,
			`{"approved":true,"note":"fine"}`: `{"approved":true,"note":"fine","respondedBy":"service"}`,
		}},
	}
	body := func(value string) string {
		if value == none {
			return `{}`
		}
		return `{"value":` + value + `}`
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			fs := e.chat("", map[string]any{"message": `/tool flow {"kind":"` + c.kind + `"}`})
			var started map[string]any
			if res := ofType(fs, "tool_call_result"); len(res) != 1 || json.Unmarshal([]byte(str(res[0].Data["content"])), &started) != nil {
				t.Fatalf("frames %v", types(fs))
			}
			parked := str(started["session_id"])
			for _, v := range c.bad {
				r := e.do("POST", "/api/sessions/"+parked+"/answer", "", body(v))
				if r.Status != 400 || r.JSON["error"] != "invalid_request" || r.JSON["field"] != "value" {
					t.Errorf("answer %s: %d %s; want 400 naming value", v, r.Status, r.Body)
				}
			}
			if r := e.do("GET", "/api/sessions/"+parked, "", nil); r.JSON["status"] != "awaiting-input" || r.JSON["answered_by"] != nil {
				t.Fatalf("after the refused answers: %s", r.Body)
			}
			for v, want := range c.good {
				id := parked
				if v != firstKey(c.good) {
					r := e.do("POST", "/api/sessions/"+parked+"/restart", "", nil)
					if r.Status != 200 || r.JSON["status"] != "awaiting-input" {
						t.Fatalf("restart: %d %s", r.Status, r.Body)
					}
					id = str(r.JSON["session_id"])
				}
				if r := e.do("POST", "/api/sessions/"+id+"/answer", "", body(v)); r.Status != 200 {
					t.Errorf("answer %s: %d %s", v, r.Status, r.Body)
					continue
				}
				r := e.waitRecord("", id, "completed")
				if got := string(mustJSON(t, r.JSON["result"])); !jsonEqual(t, got, want) {
					t.Errorf("answer %s: the handler got %s, want %s", v, got, want)
				}
			}
		})
	}
}

// firstKey is the least key of m: the value answered on the run parked first.
func firstKey(m map[string]string) string {
	first := ""
	for k := range m {
		if first == "" || k < first {
			first = k
		}
	}
	return first
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return cmp.Equal(x, y)
}
