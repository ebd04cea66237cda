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
// stored by Ingest, or a pushed commit's tree, stored by StoreCommit) into a tree, under limits'
// tree limits, with the rules of bundle.ReadTarGz. A missing object is an error wrapping
// registry.ErrNotFound.
func ReadSourceVersion(ctx context.Context, obj registry.Objects, key string, limits Limits) (fs.FS, error) {
	rc, _, err := obj.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read source archive %s: %w", key, err)
	}
	defer rc.Close() //nolint:errcheck // read-only: a close error changes nothing
	return bundle.ReadTarGz(rc, limits.Tree)
}

// StoreCommit reads the whole tree of a fetched commit (GitCommit.Tree, under the commit's limits)
// and stores it under key in obj as a canonical source archive (bundle.WriteTarGz), which
// ReadSourceVersion reads back into the same files: a build of that tree gives the same bundle as
// a build of the fetched commit. It returns the archive's size. The archive holds the commit's
// files and nothing else: no git credentials, no history.
func StoreCommit(ctx context.Context, obj registry.Objects, key string, c *GitCommit) (int64, error) {
	tree, err := c.Tree(ctx)
	if err != nil {
		return 0, err
	}
	var archive bytes.Buffer
	if err := bundle.WriteTarGz(&archive, tree); err != nil {
		return 0, err
	}
	if err := obj.Put(ctx, key, bytes.NewReader(archive.Bytes()), int64(archive.Len())); err != nil {
		return 0, fmt.Errorf("store the tree of commit %s: %w", c.result.Commit, err)
	}
	return int64(archive.Len()), nil
}
