package evals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"svc/runner/models"
)

// judgeSystem is the judge's system prompt. models.Request has no structured-output option, so
// the JSON shape is asked for here and the answer parsed strictly (parseVerdicts).
const judgeSystem = `You grade the answer of an AI agent against assertions written by its developers.
You are given the user's message, the tool calls the agent made, the skills it loaded, how the turn ended,
the agent's answer text, and numbered assertions. Decide for each assertion whether the transcript shows it holds.
An assertion that says what must NOT happen passes when it did not happen.
Answer with one JSON object and nothing else, in this shape:
{"verdicts": [{"index": 1, "pass": true, "reason": "one short sentence"}]}
Give exactly one verdict per assertion, with its number as index and pass a boolean.`

// maxJudgeField bounds each tool parameter or result shown to the judge, in bytes.
const maxJudgeField = 2000

// verdict is the judge's answer about one assertion.
type verdict struct {
	status Status // pass, fail or error
	reason string
}

// judge asks the model about assertions (texts, numbered from 1 in the prompt) for one run and
// returns one verdict per assertion and the judge's tokens. A failed call or a malformed answer
// gives error verdicts; only ctx's end is returned as an error.
func judge(ctx context.Context, p *Params, query string, t *turn, assertions []string) ([]verdict, int, error) {
	req := models.Request{
		Model:  p.JudgeModel,
		System: judgeSystem,
		Messages: []models.Message{{
			Role:    models.RoleUser,
			Content: judgePrompt(query, t, assertions),
		}},
	}
	resp, err := p.Judge.Stream(ctx, req, func(models.Event) error { return nil })
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("judge: %w", context.Cause(ctx))
		}
		return allError(len(assertions), "judge call failed: "+err.Error()), 0, nil
	}
	if resp.Message.Content == models.EchoPrefix+req.Messages[0].Content {
		// The echo model repeats the prompt: no verdict can come of it, whatever the assertions.
		return allError(len(assertions), echoJudge), resp.Usage.Total(), nil
	}
	return parseVerdicts(resp.Message.Content, len(assertions)), resp.Usage.Total(), nil
}

// echoJudge is the reason of every judged assertion when the judge is the echo model.
const echoJudge = "no judge model: the echo model judged, and it only repeats the prompt; " +
	"set SVC_EVAL_JUDGE_MODEL (such as openai/gpt-4.1-mini) or the agent's models.main in svc.json to a real model"

// judgePrompt writes the transcript and the numbered assertions for the judge.
func judgePrompt(query string, t *turn, assertions []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## User message\n%s\n\n## Tool calls\n", query)
	if len(t.ToolCalls) == 0 {
		b.WriteString("(none)\n")
	}
	for i, c := range t.ToolCalls {
		fmt.Fprintf(&b, "%d. %s parameters=%s", i+1, c.Name, clip(string(c.Parameters)))
		switch {
		case c.Status == "":
			b.WriteString(" (no result)")
		case c.Error != "":
			fmt.Fprintf(&b, " status=%s error=%s", c.Status, clip(c.Error))
		case len(c.Result) > 0:
			fmt.Fprintf(&b, " status=%s result=%s", c.Status, clip(string(c.Result)))
		default:
			fmt.Fprintf(&b, " status=%s result=%s", c.Status, clip(c.Content))
		}
		b.WriteByte('\n')
	}
	if len(t.Skills) > 0 {
		fmt.Fprintf(&b, "\n## Skills loaded\n%s\n", strings.Join(t.Skills, ", "))
	}
	if len(t.Errors) > 0 {
		fmt.Fprintf(&b, "\n## Errors\n%s\n", clip(strings.Join(t.Errors, "\n")))
	}
	if t.DoneReason != "" {
		fmt.Fprintf(&b, "\n## Turn ended with\n%s\n", t.DoneReason)
	}
	fmt.Fprintf(&b, "\n## Answer text\n%s\n\n## Assertions\n", t.Text)
	for i, a := range assertions {
		fmt.Fprintf(&b, "%d. %s\n", i+1, a)
	}
	return b.String()
}

// clip shortens s to maxJudgeField bytes.
func clip(s string) string {
	if len(s) <= maxJudgeField {
		return s
	}
	return s[:maxJudgeField] + "…(truncated)"
}

// allError is n error verdicts with reason.
func allError(n int, reason string) []verdict {
	out := make([]verdict, n)
	for i := range out {
		out[i] = verdict{StatusError, reason}
	}
	return out
}

// parseVerdicts reads the judge's answer about n assertions. The answer must be one JSON object
// {"verdicts": [{"index", "pass", "reason"}]} (a surrounding ``` fence is tolerated), with
// unknown fields refused. Not JSON, no verdicts, an index out of 1..n or given twice make every
// verdict an error; a missing index or a pass that is not a boolean make that assertion's
// verdict an error.
func parseVerdicts(answer string, n int) []verdict {
	body := strings.TrimSpace(answer)
	if rest, ok := strings.CutPrefix(body, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		if inner, ok := strings.CutSuffix(strings.TrimSpace(rest), "```"); ok {
			body = strings.TrimSpace(inner)
		}
	}
	var doc struct {
		Verdicts []struct {
			Index  *int            `json:"index"`
			Pass   json.RawMessage `json:"pass"`
			Reason string          `json:"reason"`
		} `json:"verdicts"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return allError(n, "malformed verdict: not the JSON object asked for: "+err.Error()+": "+clip(answer))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return allError(n, "malformed verdict: text after the JSON object")
	}
	if doc.Verdicts == nil {
		return allError(n, `malformed verdict: no "verdicts" array`)
	}
	out := make([]verdict, n)
	seen := make([]bool, n)
	for _, v := range doc.Verdicts {
		switch {
		case v.Index == nil:
			return allError(n, "malformed verdict: a verdict has no index")
		case *v.Index < 1 || *v.Index > n:
			return allError(n, fmt.Sprintf("malformed verdict: index %d is not an assertion (1..%d)", *v.Index, n))
		case seen[*v.Index-1]:
			return allError(n, fmt.Sprintf("malformed verdict: index %d is given twice", *v.Index))
		}
		i := *v.Index - 1
		seen[i] = true
		switch {
		case bytes.Equal(v.Pass, []byte("true")):
			out[i] = verdict{StatusPass, v.Reason}
		case bytes.Equal(v.Pass, []byte("false")):
			out[i] = verdict{StatusFail, v.Reason}
		default:
			out[i] = verdict{StatusError, fmt.Sprintf("malformed verdict: pass of index %d is %s, not a boolean", i+1, orMissing(v.Pass))}
		}
	}
	for i, ok := range seen {
		if !ok {
			out[i] = verdict{StatusError, fmt.Sprintf("malformed verdict: no verdict for index %d", i+1)}
		}
	}
	return out
}

func orMissing(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "missing"
	}
	return string(raw)
}
