package deploy_test

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"svc/deploy"
	"svc/migrations/dbtest"
	"svc/registry"
)

// TestLifecycle promotes, activates and rolls back through deploy.Lifecycle, and checks the typed
// errors the API maps to its codes: a gate that blocks, an environment with nothing to promote,
// a bundle that does not open (nothing changes), a deployment with no bundle.
func TestLifecycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		e := newEnv(t, db, nil)
		repo, c1, a := e.gitAgent(t, "Desk", "hello", true)
		repo.Branch(t, "feature/x")
		l := deploy.NewLifecycle(deploy.LifecycleConfig{
			Deployments: e.stores.Deployments, Sources: e.stores.Sources, Gate: e.stores.CommitStatuses, Objects: e.objects,
		})
		out, err := e.deployer.Push(ctx, a.ID, push("feature/x", c1))
		if err != nil {
			t.Fatal(err)
		}
		preview := e.wait(t, out.DeployID)
		if !preview.Serving() {
			t.Fatalf("preview = %+v\nlog:\n%s", preview, e.logText(t, out.BuildID))
		}
		req := deploy.PromoteRequest{AgentID: a.ID, From: preview.Environment, Actor: "test"}

		if _, err := l.Promote(ctx, deploy.PromoteRequest{AgentID: a.ID, From: "staging"}); !errors.Is(err, deploy.ErrNothingToPromote) {
			t.Fatalf("Promote(staging) = %v, want ErrNothingToPromote", err)
		}
		if _, err := e.stores.CommitStatuses.Add(ctx, registry.CommitStatus{AgentID: a.ID, Commit: c1, Context: registry.EvalsContext, State: registry.StateFailure}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Promote(ctx, req); !errors.Is(err, registry.ErrEvalGateBlocked) {
			t.Fatalf("Promote with failed evals = %v, want ErrEvalGateBlocked", err)
		}
		req.Force = true
		first, err := l.Promote(ctx, req)
		if err != nil || !first.IsActive || first.Environment != registry.Production || first.BundleKey != preview.BundleKey {
			t.Fatalf("forced Promote = %+v, %v", first, err)
		}
		second, err := l.Promote(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := l.Rollback(ctx, a.ID, "", "", "test"); err != nil || d.ID != first.ID {
			t.Fatalf("Rollback = %+v, %v; want %s", d, err, first.ID)
		}
		if d, err := l.Activate(ctx, second, "test"); err != nil || d.ID != second.ID || !d.IsActive {
			t.Fatalf("Activate = %+v, %v", d, err)
		}

		// Without the bundle nothing opens and nothing changes.
		if err := e.objects.Delete(ctx, preview.BundleKey); err != nil {
			t.Fatal(err)
		}
		var be *deploy.BundleError
		if _, err := l.Activate(ctx, first, "test"); !errors.As(err, &be) || be.DeployID != first.ID {
			t.Errorf("Activate without its bundle = %v, want a BundleError of %s", err, first.ID)
		}
		if _, err := l.Rollback(ctx, a.ID, "", first.ID, "test"); !errors.As(err, &be) || be.DeployID != first.ID {
			t.Errorf("Rollback without its bundle = %v, want a BundleError of %s", err, first.ID)
		}
		if _, err := l.Promote(ctx, req); !errors.As(err, &be) || !errors.Is(err, registry.ErrBundleUnavailable) {
			t.Errorf("Promote without its bundle = %v, want a BundleError and ErrBundleUnavailable", err)
		}
		if d, err := e.stores.Deployments.Active(ctx, a.ID, registry.Production); err != nil || d.ID != second.ID {
			t.Errorf("active production = %s, %v; want %s unchanged", d.ID, err, second.ID)
		}

		var nb *deploy.NotBuiltError
		if _, _, err := l.Open(ctx, registry.Deployment{ID: "d_none", Status: registry.StatusBuilding}); !errors.As(err, &nb) || nb.Status != registry.StatusBuilding {
			t.Errorf("Open of a deployment without a bundle = %v, want a NotBuiltError", err)
		}
	})
}
