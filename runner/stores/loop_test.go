package stores_test

import (
	"context"
	"testing"

	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sse"
	"svc/runner/stores"
	"svc/runner/tools"
)

// resultFrames keeps the tool_call_result frames of a run.
type resultFrames struct{ got []sse.Frame }

func (s *resultFrames) Emit(f *sse.Frame) error {
	if f.Type == sse.TypeToolCallResult {
		c := *f
		c.Result = append([]byte(nil), f.Result...)
		s.got = append(s.got, c)
	}
	return nil
}

// TestThroughTheLoop runs store tools as the agent loop does, with the echo model asking for
// them: the client sees success with the contract's shape as the result, or an error naming
// the field, and the run's session is traced.
func TestThroughTheLoop(t *testing.T) {
	r := newMemoryRecords(t)
	set := tools.NewSet(stores.Tools(r, map[string]string{"tickets": "rw"})...)
	ctx := context.Background()
	run := func(message string) sse.Frame {
		t.Helper()
		sink := &resultFrames{}
		res := loop.Run(ctx, &loop.Params{
			Provider: models.Echo{}, ProviderName: "echo", Model: "echo", Tools: set, Sink: sink,
			Session: tools.Session{ID: "sess-9"},
			Input:   []models.Message{{Role: models.RoleUser, Content: message}},
		})
		if res.Err != nil || len(sink.got) != 1 {
			t.Fatalf("run %q: %v, %d tool results", message, res.Err, len(sink.got))
		}
		return sink.got[0]
	}
	f := run(`/tool store__tickets__set {"customer_id":"acme","number":7,"status":"open"}`)
	want := `{"key":"acme-7","version":1,"value":{"customer_id":"acme","number":7,"status":"open"}}`
	if f.Status != sse.StatusSuccess || string(f.Result) != want || f.Content != want {
		t.Fatalf("set frame: status %s, result %s, content %s", f.Status, f.Result, f.Content)
	}
	f = run(`/tool store__tickets__set {"customer_id":"acme","number":7,"status":"done"}`)
	// The loop checks the arguments against the tool's schema before the tool runs.
	if f.Status != sse.StatusError || f.Error != `invalid arguments for store__tickets__set: status: must be one of "open", "pending", "closed"; got "done"` {
		t.Fatalf("refused set frame: status %s, error %q", f.Status, f.Error)
	}
	hist, err := r.History(context.Background(), "tickets", "acme-7")
	if err != nil || len(hist) != 1 || hist[0].Trace == nil || hist[0].Trace.SessionID != "sess-9" || hist[0].Trace.ToolCallID == "" {
		t.Fatalf("history %+v, %v: want one version traced to sess-9 and its call", hist, err)
	}
}
