package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"svc/builder"
	"svc/registry"
	"svc/workers"
)

// RedeployRequest is the body of POST /api/deployments/redeploy.
type RedeployRequest struct {
	AgentID         string
	Branch          string
	Environment     string
	SourceVersionID string
	ReuseBuild      bool
}

// RedeployOutcome is the answer of a redeploy.
type RedeployOutcome struct {
	DeployID    string `json:"deployId"`
	BuildID     string `json:"buildId"`
	Environment string `json:"environment"`
	Reused      bool   `json:"reused,omitempty"`
}

// Redeploy starts a build of the branch head (git) or of a source version (hosted), or with
// ReuseBuild returns the environment's newest non-failed build of that commit, or the one in
// flight. A request that does not fit the source wraps ErrBadRedeploy, a branch the repository
// does not have ErrBranchAbsent, an agent with nothing to build ErrNoSource.
func (d *Deployer) Redeploy(ctx context.Context, req RedeployRequest) (RedeployOutcome, error) {
	src, err := d.cfg.Sources.AgentSource(ctx, req.AgentID)
	if err != nil {
		return RedeployOutcome{}, err
	}
	br := registry.BuildRequest{AgentID: req.AgentID, Environment: req.Environment, Trigger: "redeploy", Reuse: req.ReuseBuild}
	switch src.Type {
	case "git":
		if req.SourceVersionID != "" {
			return RedeployOutcome{}, fmt.Errorf("%w: sourceVersionId applies to hosted sources only", ErrBadRedeploy)
		}
		// Spec 4.1: environment defaults to production, branch to the source's default branch
		// (for a preview-<branch> environment, that branch).
		br.Branch = req.Branch
		if br.Environment == "" {
			br.Environment = registry.Production
		}
		if br.Branch == "" {
			br.Branch = src.DefaultBranch
			if b, ok := strings.CutPrefix(br.Environment, "preview-"); ok {
				br.Branch = b
			}
		}
		if br.Commit, err = d.head(ctx, src, br.Branch); err != nil {
			return RedeployOutcome{}, err
		}
	case "hosted", "":
		// An agent with no connected source builds its uploaded source versions, like a hosted one.
		if req.Branch != "" {
			return RedeployOutcome{}, fmt.Errorf("%w: branch applies to git sources only", ErrBadRedeploy)
		}
		if br.Environment == "" {
			br.Environment = registry.Production
		}
		sv, err := d.cfg.Sources.SourceVersion(ctx, req.AgentID, req.SourceVersionID)
		if err != nil {
			return RedeployOutcome{}, err
		}
		br.SourceVersionID = sv.ID
	default:
		return RedeployOutcome{}, fmt.Errorf("%w: unknown source type %q", ErrNoSource, src.Type)
	}
	st, err := d.cfg.Deployments.StartBuild(ctx, br)
	if err != nil {
		return RedeployOutcome{}, err
	}
	out := RedeployOutcome{DeployID: st.Deployment.ID, BuildID: st.Build.ID, Environment: br.Environment, Reused: st.Reused}
	if !st.Reused {
		if err := d.enqueue(ctx, st.Build.ID, workers.NewBuildTask(ctx, st.Build.ID)); err != nil {
			return RedeployOutcome{}, err
		}
	}
	return out, nil
}

// head resolves a branch's head commit on the remote (git ls-remote).
func (d *Deployer) head(ctx context.Context, src workers.AgentSource, branch string) (string, error) {
	gs, err := src.Git(ctx, d.cfg.Credentials, branch, "")
	if err != nil {
		return "", err
	}
	head, err := builder.BranchHead(ctx, gs)
	if errors.Is(err, builder.ErrBranchNotFound) {
		return "", fmt.Errorf("%w: %q", ErrBranchAbsent, branch)
	}
	return head, err
}
