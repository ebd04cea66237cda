package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// TaskDurableWake is the task type that wakes a durable tool run at its time: the end of a
// sleep, the timeout of a pause, or the end of an execution's lease (to resume a run whose
// executor died).
const TaskDurableWake = "durable:wake"

// Wakeup is the payload of TaskDurableWake.
type Wakeup struct {
	AgentID  string    `json:"agentId"`
	DeployID string    `json:"deployId"` // the deployment whose bundle runs the run
	RunID    string    `json:"runId"`
	At       time.Time `json:"at"`
}

// EnqueueWakeup schedules w on q at w.At. A wake-up of the same run at the same millisecond is
// enqueued once.
func EnqueueWakeup(ctx context.Context, q Queue, w Wakeup) error {
	p, _ := json.Marshal(w) // strings and a time always marshal
	id := "durable:" + w.RunID + ":" + strconv.FormatInt(w.At.UnixMilli(), 10)
	err := q.Enqueue(ctx, Task{Type: TaskDurableWake, Payload: p, ID: id}, ProcessAt(w.At), MaxRetry(10))
	if errors.Is(err, ErrDuplicate) {
		return nil
	}
	return err
}

// WakeHandler is the handler of TaskDurableWake: Wake does what is due for the run (the
// runtime of its deployment, loaded from its bundle, decides what).
type WakeHandler struct {
	Wake func(ctx context.Context, w Wakeup) error
}

// ProcessTask implements Handler.
func (h *WakeHandler) ProcessTask(ctx context.Context, t Task) error {
	var w Wakeup
	if err := json.Unmarshal(t.Payload, &w); err != nil || w.RunID == "" {
		return fmt.Errorf("%w: durable wake-up payload %q is unreadable", ErrSkipRetry, t.Payload)
	}
	return h.Wake(ctx, w)
}
