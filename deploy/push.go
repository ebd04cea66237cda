package deploy

import (
	"context"

	"svc/agent"
	"svc/builder"
	"svc/registry"
	"svc/webhook"
	"svc/workers"
)

// PushOutcome is the answer to a push (CONTRACT §4).
type PushOutcome struct {
	Action      string `json:"action"` // build | recorded | skipped
	Reason      string `json:"reason"`
	BuildID     string `json:"buildId,omitempty"`
	DeployID    string `json:"deployId,omitempty"`
	Environment string `json:"environment"`
}

// Push applies the build rows of spec table 3.1 to a push of the agent's connected repository.
func (d *Deployer) Push(ctx context.Context, agentID string, push webhook.Push) (PushOutcome, error) {
	src, err := d.cfg.Sources.AgentSource(ctx, agentID)
	if err != nil {
		return PushOutcome{}, err
	}
	out := PushOutcome{Environment: EnvironmentFor(push.Branch, src.ProductionBranch)}
	switch {
	case push.Tag != "" || push.Branch == "":
		return PushOutcome{Action: "skipped", Reason: "tag"}, nil
	case push.Deleted:
		return PushOutcome{Action: "skipped", Reason: "branch-deleted", Environment: out.Environment}, nil
	case !src.AutoDeploy:
		err := d.cfg.Pushes.Record(ctx, registry.Push{AgentID: agentID, Branch: push.Branch, CommitSHA: push.After, Pusher: push.Pusher, Message: push.HeadMessage})
		if err != nil {
			return PushOutcome{}, err
		}
		out.Action, out.Reason = "recorded", "auto-deploy-off"
		return out, nil
	}
	// ci.deploy.branches of the pushed commit's svc.json restrict which pushes build.
	if filtered, err := d.branchFiltered(ctx, src, push); err != nil {
		d.log.WarnContext(ctx, "read ci.deploy of pushed commit", "agent", agentID, "commit", push.After, "err", err)
	} else if filtered {
		out.Action, out.Reason = "skipped", "branch-filtered"
		return out, nil
	}
	st, err := d.cfg.Deployments.StartBuild(ctx, registry.BuildRequest{
		AgentID: agentID, Environment: out.Environment, Branch: push.Branch, Commit: push.After, Trigger: "push", Reuse: true,
	})
	if err != nil {
		return PushOutcome{}, err
	}
	out.BuildID, out.DeployID = st.Build.ID, st.Deployment.ID
	if st.Reused {
		d.cfg.Commits.Take(src, push.Branch, push.After) // no build will take it
		out.Action, out.Reason = "skipped", "already-built"
		if st.Building {
			out.Reason = "already-building"
		}
		return out, nil
	}
	if err := d.enqueue(ctx, st.Build.ID); err != nil {
		return PushOutcome{}, err
	}
	out.Action, out.Reason = "build", "push"
	return out, nil
}

// branchFiltered reads svc.json at the pushed commit, and nothing else of its tree, and applies
// ci.deploy.branches. A commit that may build is kept in Commits for its build.
func (d *Deployer) branchFiltered(ctx context.Context, src workers.AgentSource, push webhook.Push) (bool, error) {
	gs, err := src.Git(ctx, d.cfg.Credentials, push.Branch, push.After)
	if err != nil {
		return false, err
	}
	commit, err := builder.FetchCommit(ctx, gs, d.cfg.Limits)
	if err != nil {
		return false, err
	}
	files, err := commit.Files(ctx, "svc.json")
	if err != nil {
		return false, err
	}
	f, err := agent.DeployFilterOf(files)
	filtered := err == nil && !f.Allows(push.Branch)
	if err == nil && !filtered {
		d.cfg.Commits.Put(src, push.Branch, push.After, commit)
	}
	return filtered, err
}
