package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/models"
	"svc/runner/runtime"
	"svc/runner/tools"
)

// refundTool asks for approval on every call.
type refundTool struct{ calls atomic.Int32 }

func (*refundTool) Spec() models.ToolSpec {
	return models.ToolSpec{Name: "refund", Description: "Refunds.", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (*refundTool) NeedsApproval(context.Context, tools.Call) (*tools.ApprovalRequest, error) {
	return &tools.ApprovalRequest{Endpoint: "/refunds", Method: "POST", Reason: "moves money", Connection: "billing"}, nil
}

func (r *refundTool) Call(context.Context, tools.Call) (tools.Result, error) {
	r.calls.Add(1)
	return tools.Result{Content: "refunded"}, nil
}

// TestChatAnswersInPlace drives `svc chat` through its stdin: the agent's question is answered
// by an option's number, and approvals by y or n typed when the turn asks.
func TestChatAnswersInPlace(t *testing.T) {
	dir := agenttest.Write(t, map[string]string{
		"svc.json":                  `{"name": "desk", "version": "1"}`,
		"agents/default/AGENT.md":   "You are the desk.",
		"agents/default/agent.json": `{"name": "default", "tools": ["ask_user"]}`,
	})
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	refund := &refundTool{}
	rt, err := runtime.New(runtime.Options{Agent: ag, ExtraTools: []tools.Tool{refund}, ApprovalTimeout: time.Minute,
		DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	defer func() { srv.Close(); _ = rt.Close(context.Background()) }()
	t.Setenv("AUTH_TOKEN", "")

	stdin := strings.Join([]string{
		`/tool ask_user {"question": "Which plan?", "options": [{"value": "pro", "label": "Pro"}, {"value": "team", "label": "Team"}]}`,
		"2",
		`/tool refund {"order": 7}`,
		"y",
		`/tool refund {"order": 8}`,
		"n",
	}, "\n") + "\n"
	res := runCLIWith(context.Background(), t, nil, strings.NewReader(stdin), nil, "chat", "--runtime", srv.URL)
	if res.err != nil {
		t.Fatalf("svc chat: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	wantLines(t, "svc chat", res.stdout,
		"? Which plan?", "  1) Pro", "  2) Team", "(answer with a number)",
		"echo: team",
		`→ refund {"order":7}`, "? refund wants to POST /refunds on billing (moves money)", "approve? [y/N]", "(approved)", "← refunded",
		`→ refund {"order":8}`, "approve? [y/N]", "(denied)", "← error: the user denied this call",
	)
	if refund.calls.Load() != 1 {
		t.Errorf("the refund ran %d times, want once (approved once, denied once)", refund.calls.Load())
	}
	// With --message and nothing on stdin, an approval is denied at once rather than left waiting.
	res = runCLIWith(context.Background(), t, nil, strings.NewReader(""), nil, "chat", "--runtime", srv.URL, "-m", `/tool refund {}`)
	wantLines(t, "svc chat -m", res.stdout, "approve? [y/N]", "(no answer on stdin: denied)", "(denied)")
	if refund.calls.Load() != 1 {
		t.Errorf("the refund ran without an answer")
	}
}
