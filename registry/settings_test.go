package registry_test

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/webhook"
)

func TestSettings(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewSettings(db)
		sources := registry.NewSources(db, testCipher(t, 3), webhook.NormalizeRepoURL)
		a := mustCreateAgent(t, db, "one")
		ptr := func(v bool) *bool { return &v }
		str := func(v string) *string { return &v }

		// No source, no row: spec 2.2 defaults with "main".
		got, err := s.Get(ctx, a.ID)
		want := registry.DeploySettings{AgentID: a.ID, ProductionBranch: "main"}
		if err != nil || got != want {
			t.Errorf("Get = %+v, %v; want %+v", got, err, want)
		}
		// The source's default branch is the default production branch.
		if _, err := sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "https://x.test/a/b", DefaultBranch: "trunk"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Get(ctx, a.ID); got.ProductionBranch != "trunk" || got.ProductionBranchSet {
			t.Errorf("Get with a git source = %+v, want trunk (defaulted)", got)
		}
		// PUT any subset; the rest stays.
		got, err = s.Put(ctx, a.ID, registry.SettingsPatch{AutoDeploy: ptr(true)})
		want = registry.DeploySettings{AgentID: a.ID, ProductionBranch: "trunk", AutoDeploy: true}
		if err != nil || got != want {
			t.Errorf("Put autoDeploy = %+v, %v; want %+v", got, err, want)
		}
		got, err = s.Put(ctx, a.ID, registry.SettingsPatch{ProductionBranch: str("release"), AutoPromoteProduction: ptr(true)})
		want = registry.DeploySettings{AgentID: a.ID, ProductionBranch: "release", ProductionBranchSet: true, AutoDeploy: true, AutoPromoteProduction: true}
		if err != nil || got != want {
			t.Errorf("Put branch = %+v, %v; want %+v", got, err, want)
		}
		got, err = s.Put(ctx, a.ID, registry.SettingsPatch{AutoDeploy: ptr(false)})
		want.AutoDeploy = false
		if err != nil || got != want {
			t.Errorf("Put autoDeploy false = %+v, %v; want %+v", got, err, want)
		}
		// An empty branch returns to the default.
		got, err = s.Put(ctx, a.ID, registry.SettingsPatch{ProductionBranch: str("")})
		if err != nil || got.ProductionBranch != "trunk" || got.ProductionBranchSet {
			t.Errorf("Put empty branch = %+v, %v; want trunk (defaulted)", got, err)
		}
		// An empty patch changes nothing.
		if again, err := s.Put(ctx, a.ID, registry.SettingsPatch{}); err != nil || again != got {
			t.Errorf("Put {} = %+v, %v; want %+v", again, err, got)
		}

		var ie *registry.InvalidError
		if _, err := s.Put(ctx, a.ID, registry.SettingsPatch{ProductionBranch: str("bad branch")}); !errors.As(err, &ie) || ie.Field != "productionBranch" {
			t.Errorf("Put bad branch = %v, want an InvalidError for productionBranch", err)
		}
		if _, err := s.Put(ctx, "anosuchagent", registry.SettingsPatch{AutoDeploy: ptr(true)}); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("Put for a missing agent = %v, want ErrAgentNotFound", err)
		}
	})
}
