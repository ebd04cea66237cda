package workers

import (
	"context"
	"errors"

	"svc/builder"
	"svc/registry"
)

// ErrNoSource means an agent has nothing to build: no git source, and no source version.
var ErrNoSource = errors.New("workers: agent has no source to build")

// AgentSource is what a build, and the decision to start one, need to know of an agent: its
// source and deploy settings.
type AgentSource struct {
	AgentID string
	Slug    string
	// Type is "git" or "hosted"; "" when no source is connected.
	Type          string
	URL           string
	DefaultBranch string
	Credentials   string // "env:VAR" naming "user:token" or a token, or ""
	// Deploy settings (spec 2.2), with their defaults applied.
	ProductionBranch      string
	AutoDeploy            bool
	AutoPromoteProduction bool
}

// Git is the git source of commit (a full hash, or "" for the head) on branch of src's
// repository, with src's credentials resolved by creds.
func (src AgentSource) Git(ctx context.Context, creds builder.Credentials, branch, commit string) (builder.GitSource, error) {
	auth, err := creds.GitAuth(ctx, src.AgentID, src.Credentials)
	if err != nil {
		return builder.GitSource{}, err
	}
	return builder.GitSource{URL: src.URL, Branch: branch, Commit: commit, Auth: auth}, nil
}

// SourceVersion is a stored hosted source tree.
type SourceVersion struct {
	ID        string
	ObjectKey string
}

// Sources answers questions about agents' sources. Implementations read the registry.
type Sources interface {
	// AgentSource returns the agent's source and settings.
	AgentSource(ctx context.Context, agentID string) (AgentSource, error)
	// SourceVersion returns a hosted source version, or with id "" the agent's newest; none is ErrNoSource.
	SourceVersion(ctx context.Context, agentID, id string) (SourceVersion, error)
}

// RegistrySources answers Sources from the registry's stores.
type RegistrySources struct {
	Agents         *registry.Agents
	Sources        *registry.Sources
	Settings       *registry.Settings
	SourceVersions *registry.SourceVersions
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

// NewRegistrySources answers from st.
func NewRegistrySources(st *registry.Stores) *RegistrySources {
	return &RegistrySources{
		Agents: st.Agents, Sources: st.Sources, Settings: st.Settings,
		SourceVersions: st.SourceVersions,
	}
}
