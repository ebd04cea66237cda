package turn

import (
	"time"

	"svc/runner/loop"
	"svc/runner/models"
	"svc/runner/sse"
)

// Observer is told of each turn that runs, for metrics. Its methods are called from the turn's
// goroutine and must be quick and safe for concurrent use.
type Observer interface {
	// TurnStarted is called when a turn starts streaming; TurnDone when it has ended.
	TurnStarted()
	TurnDone(Report)
}

// Report is what a turn did.
type Report struct {
	Provider, Model string
	Reason          loop.Reason
	Usage           models.Usage
	// FirstDelta is the time from the start of Run to the first text or thinking delta; 0 when
	// the turn streamed none.
	FirstDelta time.Duration
	// Tools are the tool calls of the turn, in order.
	Tools []ToolOutcome
}

// ToolOutcome is one tool call of a turn.
type ToolOutcome struct {
	Name  string
	Error bool
}

// timingSink passes frames on and notes when the first delta went out.
type timingSink struct {
	next  loop.Sink
	start time.Time
	first time.Duration
}

func (s *timingSink) Emit(f *sse.Frame) error {
	if s.first == 0 && (f.Type == sse.TypeTextDelta || f.Type == sse.TypeThinkingDelta) {
		s.first = max(time.Since(s.start), time.Nanosecond)
	}
	return s.next.Emit(f)
}

// report is the Report of a finished run.
func (t *Turn) report(res loop.Result, first time.Duration) Report {
	r := Report{Provider: t.ref.Provider, Model: t.ref.Model, Reason: res.Reason, Usage: res.Usage, FirstDelta: first}
	for _, m := range res.Messages {
		if m.Role == models.RoleTool {
			r.Tools = append(r.Tools, ToolOutcome{Name: m.ToolName, Error: m.IsError})
		}
	}
	return r
}
