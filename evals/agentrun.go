package evals

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"svc/agent"
	"svc/runner/models"
)

// ApprovalTimeout is the approval timeout of the runtime an agent's evals run on: what an eval's
// tools would ask a person to approve is denied at once, since no one answers an eval.
const ApprovalTimeout = time.Second

// AgentParams configures RunAgent. Zero values are documented defaults.
type AgentParams struct {
	// Agent is the agent whose evals run, loaded from the deployment's bundle.
	Agent *agent.Agent
	// Chat runs a turn on a runtime of the agent's deployment (Params.Chat).
	Chat ChatFunc
	// Models opens the provider of a model reference, with the agent's secrets.
	Models func(agent.ModelRef) (models.Provider, error)
	// JudgeModel, when its Model is set, judges every agent's evals; otherwise the agent's main
	// model does, else DefaultModel.
	JudgeModel   agent.ModelRef
	DefaultModel agent.ModelRef
	// Runs and MaxSessionTokens are Params.Runs and Params.MaxSessionTokens.
	Runs             int
	MaxSessionTokens int
}

// RunAgent runs every eval of p.Agent, in the order of their names, through p.Chat, with the
// judge p.JudgeModel (or the agent's main model, or p.DefaultModel). It returns Run's state and
// Result as JSON, the record of an eval run (workers.EvalRunner), with Run's error; a judge that
// cannot be opened is an error with no result.
func RunAgent(ctx context.Context, p AgentParams) (State, json.RawMessage, error) {
	list := make([]*agent.Eval, 0, len(p.Agent.Evals))
	for _, name := range slices.Sorted(maps.Keys(p.Agent.Evals)) {
		list = append(list, p.Agent.Evals[name])
	}
	ref := p.JudgeModel
	if ref.Model == "" {
		var ok bool
		if ref, ok = p.Agent.MainModel(); !ok {
			ref = p.DefaultModel
		}
	}
	judge, err := p.Models(ref)
	if err != nil {
		return "", nil, fmt.Errorf("judge model %s/%s: %w", ref.Provider, ref.Model, err)
	}
	res, err := Run(ctx, Params{Evals: list, Chat: p.Chat, Judge: judge, JudgeModel: ref.Model, Runs: p.Runs, MaxSessionTokens: p.MaxSessionTokens})
	out, merr := json.Marshal(res)
	if err == nil {
		err = merr
	}
	return res.State, out, err
}
