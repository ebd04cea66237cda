package builder

import (
	"context"
	"fmt"

	"svc/agent"
	"svc/bundle"
	"svc/registry"
)

// OpenStored opens the bundle stored under key in objects and loads its agent, exactly as a
// runner does before it serves a deployment. It is the one way to do so: the build's verify step
// (which proves a bundle it uploaded serves), the lifecycle's check before a deployment becomes
// active (deploy), the eval runner and the runners' bundle loading (both wired in cmd/svc) all
// call it, so that what passes one check passes them all.
//
// It lives in builder because it needs the object store (registry), the bundle format (bundle)
// and the agent loader (agent), and builder is the package the design lets import all three:
// bundle may not import registry, registry imports neither, and deploy and cmd/svc already
// import builder.
//
// A missing object is an error wrapping registry.ErrNotFound; a malformed bundle one wrapping
// bundle.ErrBadBundle; an agent that does not load is wrapped as "load bundle KEY: ...".
func OpenStored(ctx context.Context, objects registry.Objects, key string) (*bundle.Bundle, *agent.Agent, error) {
	rc, _, err := objects.Get(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("open bundle %s: %w", key, err)
	}
	defer rc.Close() //nolint:errcheck // read-only; a read error is reported by Read
	b, err := bundle.Read(rc, key)
	if err != nil {
		return nil, nil, err
	}
	ag, err := b.Agent()
	if err != nil {
		return nil, nil, fmt.Errorf("load bundle %s: %w", key, err)
	}
	return b, ag, nil
}
