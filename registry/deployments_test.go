package registry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

func insertAgent(t *testing.T, db *gorm.DB, id string) {
	t.Helper()
	now := time.Now().UTC()
	if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, id, id, id, now, now).Error; err != nil {
		t.Fatal(err)
	}
}

// built starts and finishes a build of commit in env and returns its deployment.
func built(t *testing.T, s *registry.Deployments, agentID, env, commit string, activate bool) registry.Deployment {
	t.Helper()
	ctx := context.Background()
	st, err := s.StartBuild(ctx, registry.BuildRequest{AgentID: agentID, Environment: env, Commit: commit, Trigger: "redeploy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BuildRunning(ctx, st.Build.ID); err != nil {
		t.Fatal(err)
	}
	d, err := s.FinishBuild(ctx, st.Build.ID, registry.BuildOutcome{Steps: "[]", BundleKey: "bundles/x/" + commit, Digest: "sha256:" + commit, Activate: activate})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func activeID(t *testing.T, s *registry.Deployments, agentID, env string) string {
	t.Helper()
	d, err := s.Active(context.Background(), agentID, env)
	if errors.Is(err, registry.ErrNoActive) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return d.ID
}

func TestStartBuildReuse(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)
		req := registry.BuildRequest{AgentID: "a1", Environment: "preview-x", Commit: "c1", Trigger: "push", Reuse: true}

		first, err := s.StartBuild(ctx, req)
		if err != nil || first.Reused {
			t.Fatalf("first push: %+v, %v", first, err)
		}
		// A push of the same commit while it is building builds nothing.
		again, err := s.StartBuild(ctx, req)
		if err != nil || !again.Reused || !again.Building || again.Build.ID != first.Build.ID {
			t.Fatalf("push while building: %+v, %v", again, err)
		}
		// Without Reuse (a plain redeploy) a new build starts.
		plain := req
		plain.Reuse = false
		fresh, err := s.StartBuild(ctx, plain)
		if err != nil || fresh.Reused || fresh.Build.ID == first.Build.ID {
			t.Fatalf("plain redeploy: %+v, %v", fresh, err)
		}
		if fresh.Deployment.ID == "" || fresh.Deployment.Status != registry.StatusQueued {
			t.Fatalf("deployment = %+v", fresh.Deployment)
		}
		for _, id := range []string{first.Build.ID, fresh.Build.ID} {
			if _, err := s.FinishBuild(ctx, id, registry.BuildOutcome{Steps: "[]", Error: "boom"}); err != nil {
				t.Fatal(err)
			}
		}
		// The newest build of that commit failed: a push builds again.
		retry, err := s.StartBuild(ctx, req)
		if err != nil || retry.Reused {
			t.Fatalf("push after failure: %+v, %v", retry, err)
		}
		if _, err := s.FinishBuild(ctx, retry.Build.ID, registry.BuildOutcome{Steps: "[]", BundleKey: "k"}); err != nil {
			t.Fatal(err)
		}
		// The newest build is that commit and succeeded: nothing built.
		done, err := s.StartBuild(ctx, req)
		if err != nil || !done.Reused || done.Building || done.Build.ID != retry.Build.ID {
			t.Fatalf("push of built commit: %+v, %v", done, err)
		}
		// Another commit builds; after it, the old commit is no longer the newest and builds again.
		other := req
		other.Commit = "c2"
		if st, err := s.StartBuild(ctx, other); err != nil || st.Reused {
			t.Fatalf("other commit: %+v, %v", st, err)
		}
		// A finished build cannot finish twice.
		if _, err := s.FinishBuild(ctx, retry.Build.ID, registry.BuildOutcome{Steps: "[]"}); !errors.Is(err, registry.ErrBuildFinished) {
			t.Fatalf("finish twice: %v, want ErrBuildFinished", err)
		}
		if _, err := s.BuildRunning(ctx, retry.Build.ID); !errors.Is(err, registry.ErrBuildFinished) {
			t.Fatalf("running after finish: %v, want ErrBuildFinished", err)
		}
	})
}

func TestConcurrentIdenticalPushesBuildOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)
		var wg sync.WaitGroup
		starts := make([]registry.BuildStart, 8)
		errs := make([]error, 8)
		for i := range starts {
			wg.Go(func() {
				starts[i], errs[i] = s.StartBuild(context.Background(), registry.BuildRequest{AgentID: "a1", Environment: "production", Commit: "c1", Trigger: "push", Reuse: true})
			})
		}
		wg.Wait()
		builds := map[string]bool{}
		for i := range starts {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			builds[starts[i].Build.ID] = true
		}
		if len(builds) != 1 {
			t.Fatalf("identical concurrent pushes started %d builds, want 1", len(builds))
		}
	})
}

func TestActivateRollback(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)

		// A production build without autoPromoteProduction stays inactive.
		d1 := built(t, s, "a1", "production", "c1", false)
		if d1.IsActive || d1.Status != registry.StatusReady {
			t.Fatalf("d1 = %+v, want ready and inactive", d1)
		}
		if _, err := s.Rollback(ctx, "a1", "production", "", "op"); !errors.Is(err, registry.ErrNothingToRollBack) {
			t.Fatalf("rollback with nothing live before: %v", err)
		}
		if got, err := s.Activate(ctx, d1.ID, "op"); err != nil || !got.IsActive {
			t.Fatalf("activate d1: %+v, %v", got, err)
		}
		d2 := built(t, s, "a1", "production", "c2", true)
		if !d2.IsActive || activeID(t, s, "a1", "production") != d2.ID {
			t.Fatalf("autoPromote build not active")
		}
		// Another environment is untouched by production's changes.
		p1 := built(t, s, "a1", "preview-x", "c9", true)
		// Roll back: d1 was live before.
		got, err := s.Rollback(ctx, "a1", "production", "", "op")
		if err != nil || got.ID != d1.ID {
			t.Fatalf("rollback = %+v, %v; want %s", got, err, d1.ID)
		}
		// Rolling back again returns to d2, the most recently activated inactive one.
		got, err = s.Rollback(ctx, "a1", "production", "", "op")
		if err != nil || got.ID != d2.ID {
			t.Fatalf("second rollback = %+v, %v; want %s", got, err, d2.ID)
		}
		// Explicit target.
		if got, err := s.Rollback(ctx, "a1", "production", d1.ID, "op"); err != nil || got.ID != d1.ID {
			t.Fatalf("rollback to d1 = %+v, %v", got, err)
		}
		// A deployment of another environment is not a target.
		if _, err := s.Rollback(ctx, "a1", "production", p1.ID, "op"); !errors.Is(err, registry.ErrDeploymentNotFound) {
			t.Fatalf("rollback across environments: %v", err)
		}
		if activeID(t, s, "a1", "preview-x") != p1.ID {
			t.Fatal("preview changed")
		}
		// A deployment that is not ready cannot be activated.
		st, err := s.StartBuild(ctx, registry.BuildRequest{AgentID: "a1", Environment: "production", Commit: "c3"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Activate(ctx, st.Deployment.ID, "op"); !errors.Is(err, registry.ErrBuildNotReady) {
			t.Fatalf("activate queued: %v, want ErrBuildNotReady", err)
		}
		if _, err := s.Activate(ctx, "dnope", "op"); !errors.Is(err, registry.ErrDeploymentNotFound) {
			t.Fatalf("activate missing: %v", err)
		}
		acts, err := s.Activations(ctx, "a1", "production", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(acts) != 5 || acts[0].Action != "rollback" || acts[0].FromDeployID != d2.ID || acts[0].ToDeployID != d1.ID {
			t.Fatalf("activations = %+v", acts)
		}
	})
}

func TestPromote(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)
		prodBefore := built(t, s, "a1", "production", "c0", true)
		commit := strings.Repeat("c1", 20)
		src := built(t, s, "a1", "preview-main", commit, true)

		gate := registry.NewCommitStatuses(db)
		for _, state := range []registry.CommitState{registry.StatePending, registry.StateFailure, registry.StateError} {
			if _, err := gate.Add(ctx, registry.CommitStatus{AgentID: "a1", Commit: commit, Context: registry.EvalsContext, State: state}); err != nil {
				t.Fatal(err)
			}
			_, err := s.Promote(ctx, registry.PromoteRequest{AgentID: "a1", From: "preview-main", Gate: gate})
			if !errors.Is(err, registry.ErrEvalGateBlocked) {
				t.Fatalf("promote with evals %s: %v, want ErrEvalGateBlocked", state, err)
			}
		}
		_, err := s.Promote(ctx, registry.PromoteRequest{AgentID: "a1", From: "preview-main", Copy: func(context.Context, registry.Deployment) (string, error) {
			return "", errors.New("copy failed")
		}})
		if !errors.Is(err, registry.ErrBundleUnavailable) {
			t.Fatalf("promote with failing copy: %v", err)
		}
		if activeID(t, s, "a1", "production") != prodBefore.ID {
			t.Fatal("failed promotions changed production")
		}
		got, err := s.Promote(ctx, registry.PromoteRequest{AgentID: "a1", From: "preview-main", Force: true, Gate: gate})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == src.ID || got.Environment != "production" || !got.IsActive || got.PromotedFrom != src.ID || got.BundleKey != src.BundleKey {
			t.Fatalf("promoted = %+v", got)
		}
		if activeID(t, s, "a1", "preview-main") != src.ID {
			t.Fatal("promotion changed the source environment")
		}
		if _, err := s.Promote(ctx, registry.PromoteRequest{AgentID: "a1", From: "preview-none"}); !errors.Is(err, registry.ErrNoActive) {
			t.Fatalf("promote from empty env: %v", err)
		}
	})
}

// TestOneActiveUnderConcurrency fires activations, rollbacks, promotions and completing builds at
// once and checks that an environment never has two active deployments.
func TestOneActiveUnderConcurrency(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)
		var ds []registry.Deployment
		for i := range 4 {
			ds = append(ds, built(t, s, "a1", "production", fmt.Sprint("c", i), true))
		}
		built(t, s, "a1", "staging", "s1", true)
		var pending []string
		for i := range 4 {
			st, err := s.StartBuild(ctx, registry.BuildRequest{AgentID: "a1", Environment: "production", Commit: fmt.Sprint("n", i)})
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, st.Build.ID)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := range 20 {
			wg.Go(func() {
				var err error
				switch i % 5 {
				case 0:
					_, err = s.Activate(ctx, ds[i%len(ds)].ID, "op")
				case 1:
					_, err = s.Rollback(ctx, "a1", "production", "", "op")
				case 2:
					_, err = s.Promote(ctx, registry.PromoteRequest{AgentID: "a1", From: "staging", Actor: "op"})
				case 3:
					_, err = s.FinishBuild(ctx, pending[(i/5)%len(pending)], registry.BuildOutcome{Steps: "[]", BundleKey: "k", Activate: true})
					if errors.Is(err, registry.ErrBuildFinished) {
						err = nil
					}
				case 4:
					_, err = s.Rollback(ctx, "a1", "production", ds[0].ID, "op")
				}
				if err != nil && !errors.Is(err, registry.ErrNothingToRollBack) {
					errs <- err
				}
				var n int64
				if err := db.Model(&registry.Deployment{}).Where("agent_id = ? AND environment = ? AND is_active = ?", "a1", "production", true).Count(&n).Error; err != nil {
					errs <- err
				} else if n != 1 {
					errs <- fmt.Errorf("%d active production deployments", n)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestBuildLogs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		logs := registry.NewBuildLogs(db)
		for i := range 3 {
			if err := logs.Append(ctx, "b1", "validate", fmt.Sprint("line ", i)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := logs.After(ctx, "b1", 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Seq != 2 || got[1].Line != "line 2" {
			t.Fatalf("After(1) = %+v", got)
		}
	})
}

// start queues a build of commit in env and marks it running, as a worker does when it picks it up.
func start(t *testing.T, s *registry.Deployments, agentID, env, commit string) registry.BuildStart {
	t.Helper()
	ctx := context.Background()
	st, err := s.StartBuild(ctx, registry.BuildRequest{AgentID: agentID, Environment: env, Commit: commit, Trigger: "redeploy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BuildRunning(ctx, st.Build.ID); err != nil {
		t.Fatal(err)
	}
	return st
}

// finish ends a started build successfully with auto-activation, as a worker does.
func finish(t *testing.T, s *registry.Deployments, st registry.BuildStart) registry.Deployment {
	t.Helper()
	d, err := s.FinishBuild(context.Background(), st.Build.ID, registry.BuildOutcome{
		Steps: "[]", BundleKey: "bundles/x/" + st.Build.CommitSHA, Digest: "sha256:" + st.Build.CommitSHA, Activate: true, Actor: "build",
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// An older build that finishes after a newer one of the same environment does not replace it
// (issue 16): a redeploy of a large version, then one of a small version that builds faster.
// Explicit activate and rollback still choose any deployment. The same holds for production
// builds that auto-activate (autoPromoteProduction).
func TestOlderBuildDoesNotDisplaceNewer(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)
		for _, env := range []string{"preview-x", "production"} {
			a := start(t, s, "a1", env, "large")
			b := start(t, s, "a1", env, "small")
			if d := finish(t, s, b); !d.Serving() {
				t.Fatalf("%s: newer build = %+v, want ready and active", env, d)
			}
			d := finish(t, s, a)
			if d.Status != registry.StatusReady || d.IsActive {
				t.Fatalf("%s: older build = %+v, want ready and inactive", env, d)
			}
			if got := activeID(t, s, "a1", env); got != b.Deployment.ID {
				t.Fatalf("%s: active = %s, want the newer %s", env, got, b.Deployment.ID)
			}
			acts, err := s.Activations(ctx, "a1", env, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(acts) != 1 || acts[0].ToDeployID != b.Deployment.ID {
				t.Fatalf("%s: activations = %+v, want one, to %s", env, acts, b.Deployment.ID)
			}

			// An explicit activate still chooses the older one; rollback goes back and forth.
			if got, err := s.Activate(ctx, a.Deployment.ID, "op"); err != nil || !got.Serving() {
				t.Fatalf("%s: activate older = %+v, %v", env, got, err)
			}
			if got, err := s.Rollback(ctx, "a1", env, "", "op"); err != nil || got.ID != b.Deployment.ID {
				t.Fatalf("%s: rollback = %+v, %v; want %s", env, got, err, b.Deployment.ID)
			}
			if got, err := s.Rollback(ctx, "a1", env, a.Deployment.ID, "op"); err != nil || got.ID != a.Deployment.ID {
				t.Fatalf("%s: rollback to older = %+v, %v; want %s", env, got, err, a.Deployment.ID)
			}
			if got := activeID(t, s, "a1", env); got != a.Deployment.ID {
				t.Fatalf("%s: active = %s after explicit rollback, want %s", env, got, a.Deployment.ID)
			}
		}
	})
}

// Six redeploys requested in order and finished in any order (after a crash, workers take the
// queue in any order): the sixth, the newest requested, serves, and until it is ready the
// deployment that served before keeps serving.
func TestNewestRequestedWinsWhateverTheFinishOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		orders := [][]int{
			{0, 1, 2, 3, 4, 5},
			{5, 4, 3, 2, 1, 0},
			{0, 1, 3, 4, 5, 2}, // the third requested finishes last
			{5, 0, 1, 2, 3, 4},
		}
		r := rand.New(rand.NewPCG(16, 6))
		for range 8 {
			orders = append(orders, r.Perm(6))
		}
		for i, order := range orders {
			agent := fmt.Sprint("a", i)
			insertAgent(t, db, agent)
			s := registry.NewDeployments(db)
			d0 := built(t, s, agent, "staging", "before", true)
			var sts []registry.BuildStart
			for j := range 6 {
				sts = append(sts, start(t, s, agent, "staging", fmt.Sprint("c", j)))
			}
			newest := sts[5].Deployment.ID
			for _, j := range order {
				d := finish(t, s, sts[j])
				if d.Status != registry.StatusReady || d.IsActive != (j == 5) {
					t.Fatalf("order %v: deployment %d = %+v; want ready, active only when the newest", order, j, d)
				}
				if got := activeID(t, s, agent, "staging"); got != d0.ID && got != newest {
					t.Fatalf("order %v: after %d finished, %s serves; want %s (before) or %s (newest)", order, j, got, d0.ID, newest)
				}
			}
			if got := activeID(t, s, agent, "staging"); got != newest {
				t.Fatalf("order %v: %s serves, want the sixth requested %s", order, got, newest)
			}
		}
	})
}

// A newer deployment that failed or was cancelled does not hold an older build back when it
// finishes; one still in flight does, and the older stays inactive when the newer fails later
// (README, "Push to deploy": the operator activates it).
func TestNewerFailedBuild(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)
		fail := func(st registry.BuildStart) {
			t.Helper()
			if _, err := s.FinishBuild(ctx, st.Build.ID, registry.BuildOutcome{Steps: "[]", Error: "boom"}); err != nil {
				t.Fatal(err)
			}
		}
		// The newer fails first: the older activates.
		a, b := start(t, s, "a1", "staging", "a"), start(t, s, "a1", "staging", "b")
		fail(b)
		if d := finish(t, s, a); !d.Serving() {
			t.Fatalf("older after newer failed = %+v, want active", d)
		}
		// The newer fails after the older is ready: the older stays ready and inactive.
		c, e := start(t, s, "a1", "staging", "c"), start(t, s, "a1", "staging", "e")
		if d := finish(t, s, c); d.IsActive {
			t.Fatalf("older with newer building = %+v, want inactive", d)
		}
		fail(e)
		if got := activeID(t, s, "a1", "staging"); got != a.Deployment.ID {
			t.Fatalf("active = %s, want %s unchanged", got, a.Deployment.ID)
		}
		if got, err := s.Activate(ctx, c.Deployment.ID, "op"); err != nil || !got.Serving() {
			t.Fatalf("activate = %+v, %v", got, err)
		}
	})
}

// Creation order is request order even when the clock stalls or goes back (processes whose
// clocks disagree): the later request is the newer deployment.
func TestCreationOrderUnderABadClock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.UTC)
		// The clock stands still for a's and b's StartBuild and BuildRunning, then goes back.
		calls := 0
		registry.SetNow(s, func() time.Time {
			if calls++; calls > 4 {
				return t0.Add(-time.Second)
			}
			return t0
		})
		a := start(t, s, "a1", "staging", "a")
		b := start(t, s, "a1", "staging", "b")
		c := start(t, s, "a1", "staging", "c")
		if !a.Deployment.CreatedAt.Before(b.Deployment.CreatedAt) || !b.Deployment.CreatedAt.Before(c.Deployment.CreatedAt) {
			t.Fatalf("created at %v, %v, %v: want increasing", a.Deployment.CreatedAt, b.Deployment.CreatedAt, c.Deployment.CreatedAt)
		}
		for _, st := range []registry.BuildStart{c, b, a} {
			finish(t, s, st)
		}
		if got := activeID(t, s, "a1", "staging"); got != c.Deployment.ID {
			t.Fatalf("active = %s, want the last requested %s", got, c.Deployment.ID)
		}
	})
}

// FinishBuild writes the build log's last line in its transaction, saying which newer
// deployment held an older one back.
func TestFinishBuildDoneLine(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		insertAgent(t, db, "a1")
		s := registry.NewDeployments(db)
		logs := registry.NewBuildLogs(db)
		a, b := start(t, s, "a1", "staging", "a"), start(t, s, "a1", "staging", "b")
		done := func(d registry.Deployment, newer *registry.Deployment) string {
			if newer != nil {
				return fmt.Sprintf("%s active=%v held by %s", d.ID, d.IsActive, newer.ID)
			}
			return fmt.Sprintf("%s active=%v", d.ID, d.IsActive)
		}
		for _, st := range []registry.BuildStart{b, a} {
			if _, err := s.FinishBuild(ctx, st.Build.ID, registry.BuildOutcome{Steps: "[]", BundleKey: "k", Activate: true, Done: done}); err != nil {
				t.Fatal(err)
			}
		}
		for st, want := range map[registry.BuildStart]string{
			b: b.Deployment.ID + " active=true",
			a: a.Deployment.ID + " active=false held by " + b.Deployment.ID,
		} {
			last, err := logs.Last(ctx, st.Build.ID)
			if err != nil || last.Step != "done" || last.Line != want {
				t.Errorf("last line of %s = %+v, %v; want done %q", st.Build.ID, last, err, want)
			}
		}
	})
}
