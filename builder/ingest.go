package builder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"

	"svc/agent"
	"svc/bundle"
	"svc/registry"
)

// ErrUnloadable is wrapped by Ingest's error for a tree agent.Load cannot read at all (not a
// list of problems).
var ErrUnloadable = errors.New("builder: the source tree cannot be loaded")

// Ingest takes an uploaded source tree in: it validates the tree as a build would (every problem
// at once, as agent.Problems), digests it, packs it into the canonical source archive
// (bundle.WriteTarGz) and stores that as a new source version of agentID. A tree with problems
// stores nothing.
func Ingest(ctx context.Context, versions *registry.SourceVersions, agentID, actor string, tree fs.FS) (registry.SourceVersion, error) {
	if _, err := agent.Load(tree); err != nil {
		var problems agent.Problems
		if errors.As(err, &problems) {
			return registry.SourceVersion{}, problems
		}
		return registry.SourceVersion{}, fmt.Errorf("%w: %w", ErrUnloadable, err)
	}
	digest, err := bundle.Digest(tree)
	if err != nil {
		return registry.SourceVersion{}, err
	}
	var archive bytes.Buffer
	if err := bundle.WriteTarGz(&archive, tree); err != nil {
		return registry.SourceVersion{}, err
	}
	return versions.Create(ctx, registry.NewSourceVersion{AgentID: agentID, Digest: digest, CreatedBy: actor, Archive: archive.Bytes()})
}

// ReadSourceVersion reads the source archive stored under key in obj (a hosted source version,
// stored by Ingest) into a tree, under limits' tree limits, with the rules of bundle.ReadTarGz. A
// missing object is an error wrapping registry.ErrNotFound.
func ReadSourceVersion(ctx context.Context, obj registry.Objects, key string, limits Limits) (fs.FS, error) {
	rc, _, err := obj.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read source archive %s: %w", key, err)
	}
	defer rc.Close() //nolint:errcheck // read-only: a close error changes nothing
	return bundle.ReadTarGz(rc, limits.Tree)
}
