package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"svc/registry"
)

// TaskEval is the task type that runs a deployment's evals.
const TaskEval = "eval:run"

type evalPayload struct {
	EvalRunID string `json:"evalRunId"`
}

// NewEvalTask returns the task that runs eval run id; its ID dedupes it.
func NewEvalTask(evalRunID string) Task {
	p, _ := json.Marshal(evalPayload{EvalRunID: evalRunID}) // a struct of strings always marshals
	return Task{Type: TaskEval, Payload: p, ID: "eval:" + evalRunID}
}

// EvalRunner runs the evals of a deployment and returns the state (success, failure or error)
// and the runner's result as JSON; an error is a run that could not happen (its bundle does not
// open, say).
type EvalRunner func(ctx context.Context, d registry.Deployment) (state string, result json.RawMessage, err error)

// EvalHandler is the handler of TaskEval: it runs a deployment's evals, records the result and
// posts the svc/evals commit status of the deployment's commit, which gates promotion.
type EvalHandler struct {
	Runs        *registry.EvalRuns
	Deployments *registry.Deployments
	Statuses    *registry.CommitStatuses
	Run         EvalRunner
	// Notify, when set, is told of each svc/evals status recorded for run r (to post it to the
	// git host).
	Notify func(ctx context.Context, r registry.EvalRun, state, description string)
	Logger *slog.Logger
}

var _ FailureHandler = (*EvalHandler)(nil)

// pendingAlready reports whether d's commit's latest svc/evals status is pending already (the
// build held the gate for these evals).
func pendingAlready(ctx context.Context, statuses *registry.CommitStatuses, d registry.Deployment) bool {
	st, err := statuses.Latest(ctx, d.AgentID, d.CommitSHA, registry.EvalsContext)
	return err == nil && st.State == registry.StatePending
}

// QueueEvals records an eval run of deployment d, marks its commit's svc/evals status pending, and
// enqueues the run on q.
func QueueEvals(ctx context.Context, q Queue, runs *registry.EvalRuns, statuses *registry.CommitStatuses, d registry.Deployment) (registry.EvalRun, error) {
	r, err := runs.Create(ctx, d.AgentID, d.ID, d.CommitSHA)
	if err != nil {
		return registry.EvalRun{}, err
	}
	if d.CommitSHA != "" && !pendingAlready(ctx, statuses, d) {
		if _, err := statuses.Add(ctx, registry.CommitStatus{AgentID: d.AgentID, Commit: d.CommitSHA, Context: registry.EvalsContext,
			State: registry.StatePending, Description: "evals of deployment " + d.ID + " are queued"}); err != nil {
			return registry.EvalRun{}, fmt.Errorf("evals status: %w", err)
		}
	}
	if err := q.Enqueue(ctx, NewEvalTask(r.ID)); err != nil {
		return registry.EvalRun{}, fmt.Errorf("queue evals: %w", err)
	}
	return r, nil
}

// ProcessTask implements Handler.
func (h *EvalHandler) ProcessTask(ctx context.Context, t Task) error {
	var pl evalPayload
	if err := json.Unmarshal(t.Payload, &pl); err != nil || pl.EvalRunID == "" {
		return fmt.Errorf("%w: bad eval payload", ErrSkipRetry)
	}
	r, err := h.Runs.Get(ctx, pl.EvalRunID)
	if err != nil {
		return err
	}
	if r.State != registry.EvalQueued && r.State != registry.EvalRunning {
		return nil // finished already
	}
	if err := h.Runs.SetRunning(ctx, r.ID); err != nil {
		return err
	}
	d, err := h.Deployments.Get(ctx, r.DeployID)
	if err != nil {
		return h.finish(ctx, r, registry.EvalError, nil, "deployment "+r.DeployID+": "+err.Error())
	}
	state, result, err := h.Run(ctx, d)
	if err != nil {
		return h.finish(ctx, r, registry.EvalError, result, err.Error())
	}
	return h.finish(ctx, r, state, result, "")
}

// TaskFailed implements FailureHandler: an eval run that gave up is an error.
func (h *EvalHandler) TaskFailed(ctx context.Context, t Task, cause error) {
	var pl evalPayload
	if json.Unmarshal(t.Payload, &pl) != nil {
		return
	}
	r, err := h.Runs.Get(ctx, pl.EvalRunID)
	if err == nil {
		err = h.finish(ctx, r, registry.EvalError, nil, "eval run gave up: "+cause.Error())
	}
	if err != nil && h.Logger != nil {
		h.Logger.ErrorContext(ctx, "record failed eval run", "eval_run_id", pl.EvalRunID, "err", err)
	}
}

// finish records the run's end and the commit's svc/evals status.
func (h *EvalHandler) finish(ctx context.Context, r registry.EvalRun, state string, result json.RawMessage, why string) error {
	ctx = context.WithoutCancel(ctx)
	// The commit status goes first: whoever sees the run finished finds its status recorded (a
	// task retried after a failed Finish adds the same status again, which statuses allow).
	desc := "evals of deployment " + r.DeployID + ": " + state
	if why != "" {
		desc += ": " + why
	}
	if len(desc) > registry.MaxStatusDescriptionLen {
		desc = desc[:registry.MaxStatusDescriptionLen]
	}
	if r.CommitSHA != "" {
		if _, err := h.Statuses.Add(ctx, registry.CommitStatus{AgentID: r.AgentID, Commit: r.CommitSHA, Context: registry.EvalsContext,
			State: registry.CommitState(state), Description: desc}); err != nil {
			return err
		}
	}
	if err := h.Runs.Finish(ctx, r.ID, state, result, why); err != nil {
		return err
	}
	if r.CommitSHA == "" {
		return nil
	}
	if h.Notify != nil {
		h.Notify(ctx, r, state, desc)
	}
	return nil
}
