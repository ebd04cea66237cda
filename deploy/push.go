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
	commit, filtered, err := d.branchFiltered(ctx, src, push)
	if err != nil {
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
		out.Action, out.Reason = "skipped", "already-built"
		if st.Building {
			out.Reason = "already-building"
		}
		return out, nil
	}
	key := d.handOver(ctx, src, push, commit)
	if err := d.enqueue(ctx, st.Build.ID, workers.NewPushBuildTask(ctx, st.Build.ID, key)); err != nil {
		if key != "" { // no build will read it
			if derr := d.cfg.Objects.Delete(context.WithoutCancel(ctx), key); derr != nil {
				d.log.WarnContext(ctx, "delete the stored tree of an unqueued build", "key", key, "err", derr)
			}
		}
		return PushOutcome{}, err
	}
	out.Action, out.Reason = "build", "push"
	return out, nil
}

// branchFiltered fetches the pushed commit, reads its svc.json and nothing else of its tree, and
// applies ci.deploy.branches. It returns the commit, for its build, with the answer.
func (d *Deployer) branchFiltered(ctx context.Context, src workers.AgentSource, push webhook.Push) (*builder.GitCommit, bool, error) {
	gs, err := src.Git(ctx, d.cfg.Credentials, push.Branch, push.After)
	if err != nil {
		return nil, false, err
	}
	commit, err := builder.FetchCommit(ctx, gs, d.cfg.Limits)
	if err != nil {
		return nil, false, err
	}
	files, err := commit.Files(ctx, "svc.json")
	if err != nil {
		return nil, false, err
	}
	f, err := agent.DeployFilterOf(files)
	return commit, err == nil && !f.Allows(push.Branch), err
}

// handOver hands the fetched commit (nil: none was fetched) to the build about to start, so that
// the build does not fetch it again: through Commits when the build runs in this process, else
// stored in Objects, on whichever worker it runs; it returns the stored tree's key for the build
// task. It returns "" when nothing was stored: handed over in memory, nothing to store, or the
// store failed (logged; the build then fetches the commit itself).
func (d *Deployer) handOver(ctx context.Context, src workers.AgentSource, push webhook.Push, commit *builder.GitCommit) string {
	if commit == nil {
		return ""
	}
	if d.cfg.Commits != nil {
		d.cfg.Commits.Put(src, push.Branch, push.After, commit)
		return ""
	}
	if d.cfg.Objects == nil {
		return ""
	}
	key := registry.CommitSourceKey(src.AgentID, commit.Result().Commit)
	if _, err := builder.StoreCommit(ctx, d.cfg.Objects, key, commit); err != nil {
		d.log.WarnContext(ctx, "store the pushed commit's tree for its build; the build fetches it", "agent", src.AgentID, "commit", commit.Result().Commit, "err", err)
		return ""
	}
	return key
}
