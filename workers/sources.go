package workers

import (
	"context"
	"errors"

	"svc/registry"
	"svc/webhook"
)

// RegistrySources answers the pipeline's questions from the registry's stores.
type RegistrySources struct {
	Agents         *registry.Agents
	Sources        *registry.Sources
	Settings       *registry.Settings
	SourceVersions *registry.SourceVersions
	Pushes         *registry.Pushes
}

var _ Sources = (*RegistrySources)(nil)

// AgentSource implements Sources.
func (r *RegistrySources) AgentSource(ctx context.Context, agentID string) (AgentSource, error) {
	a, err := r.Agents.Get(ctx, agentID)
	if err != nil {
		return AgentSource{}, err
	}
	out := AgentSource{AgentID: a.ID, Slug: a.Slug}
	src, err := r.Sources.Get(ctx, agentID)
	switch {
	case errors.Is(err, registry.ErrSourceNotFound):
	case err != nil:
		return AgentSource{}, err
	default:
		out.Type, out.URL, out.DefaultBranch, out.Credentials = string(src.Type), src.URL, src.DefaultBranch, src.Credentials
	}
	st, err := r.Settings.Get(ctx, agentID)
	if err != nil {
		return AgentSource{}, err
	}
	out.ProductionBranch, out.AutoDeploy, out.AutoPromoteProduction = st.ProductionBranch, st.AutoDeploy, st.AutoPromoteProduction
	return out, nil
}

// SourceVersion implements Sources.
func (r *RegistrySources) SourceVersion(ctx context.Context, agentID, id string) (SourceVersion, error) {
	var sv registry.SourceVersion
	var err error
	if id == "" {
		sv, err = r.SourceVersions.Newest(ctx, agentID)
	} else {
		sv, err = r.SourceVersions.Get(ctx, agentID, id)
	}
	if errors.Is(err, registry.ErrSourceVersionNotFound) && id == "" {
		return SourceVersion{}, ErrNoSource
	}
	if err != nil {
		return SourceVersion{}, err
	}
	return SourceVersion{ID: sv.ID, ObjectKey: sv.ObjectKey}, nil
}

// RecordPush implements Sources.
func (r *RegistrySources) RecordPush(ctx context.Context, agentID string, p webhook.Push) error {
	return r.Pushes.Record(ctx, registry.Push{AgentID: agentID, Branch: p.Branch, CommitSHA: p.After, Pusher: p.Pusher, Message: p.HeadMessage})
}

// NewRegistrySources answers from st.
func NewRegistrySources(st *registry.Stores) *RegistrySources {
	return &RegistrySources{
		Agents: st.Agents, Sources: st.Sources, Settings: st.Settings,
		SourceVersions: st.SourceVersions, Pushes: st.Pushes,
	}
}
