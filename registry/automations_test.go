package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

// mustCreateAutomation stores an enabled automation of agentID in ownerScope named name, next

// racingWins runs try in 8 goroutines at once and returns how many reported a win; an error
// of any is a test error naming what raced.
func racingWins(t *testing.T, what string, try func() (bool, error)) int {
	t.Helper()
	var wg sync.WaitGroup
	var won atomic.Int32
	for range 8 {
		wg.Go(func() {
			ok, err := try()
			if err != nil {
				t.Errorf("racing %s: %v", what, err)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	return int(won.Load())
}

// due at next (nil: none).
func mustCreateAutomation(t *testing.T, s *registry.Automations, agentID, ownerScope, name string, next *time.Time) registry.Automation {
	t.Helper()
	a, err := s.Create(context.Background(), registry.Automation{AgentID: agentID, OwnerScope: ownerScope, Name: name,
		Spec: json.RawMessage(`{"name":"` + name + `","trigger":{"every":"5m"},"action":{"message":"hi"}}`), Enabled: true, NextFireAt: next,
		Saver: registry.AutomationSaver{UserID: "u1", ScopeID: ownerScope, CredentialKind: "api_key", CredentialID: "k1"}})
	if err != nil {
		t.Fatalf("create automation %q: %v", name, err)
	}
	return a
}

func ids(as []registry.Automation) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func equalIDs(got, want []string) bool { return fmt.Sprint(got) == fmt.Sprint(want) }

func TestAutomationsCRUD(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		other := mustCreateAgent(t, db, "other")
		s := registry.NewAutomations(db)
		next := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
		a := mustCreateAutomation(t, s, ag.ID, "scope-1", "digest", &next)
		if len(a.ID) < 3 || a.ID[:2] != "au" || a.CreatedAt.IsZero() || !a.Enabled {
			t.Errorf("Create = %+v", a)
		}
		got, err := s.Get(ctx, ag.ID, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := registry.AutomationSaver{UserID: "u1", ScopeID: "scope-1", CredentialKind: "api_key", CredentialID: "k1"}
		if got.Name != "digest" || got.OwnerScope != "scope-1" || !reflect.DeepEqual(got.Saver, want) || got.NextFireAt == nil || !got.NextFireAt.Equal(next) ||
			got.LastFireAt != nil || !json.Valid(got.Spec) {
			t.Errorf("Get = %+v", got)
		}
		if _, err := s.Get(ctx, other.ID, a.ID); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("Get from another agent: %v, want ErrAutomationNotFound", err)
		}
		if _, err := s.Create(ctx, registry.Automation{AgentID: "a-missing", Name: "x"}); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("Create for a missing agent: %v, want ErrAgentNotFound", err)
		}

		name, off := "weekly digest", false
		spec := json.RawMessage(`{"name":"weekly digest","trigger":{"cron":"0 9 * * 1"},"action":{"message":"go"}}`)
		got, err = s.Update(ctx, ag.ID, a.ID, registry.AutomationUpdate{Name: &name, Spec: spec, Enabled: &off, SetNextFire: true})
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != name || got.Enabled || got.NextFireAt != nil || string(got.Spec) != string(spec) {
			t.Errorf("Update = %+v", got)
		}
		if _, err := s.Update(ctx, other.ID, a.ID, registry.AutomationUpdate{Name: &name}); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("Update from another agent: %v, want ErrAutomationNotFound", err)
		}

		if err := s.Disable(ctx, a.ID, "the saver's API key was revoked"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ByID(ctx, a.ID); err != nil || got.Enabled || got.DisabledReason != "the saver's API key was revoked" {
			t.Errorf("ByID after Disable = %+v, %v", got, err)
		}
		on := true
		if got, err := s.Update(ctx, ag.ID, a.ID, registry.AutomationUpdate{Enabled: &on}); err != nil || !got.Enabled || got.DisabledReason != "" {
			t.Errorf("Update enabled = %+v, %v; want enabled with no reason", got, err)
		}
		if err := s.Disable(ctx, "au-missing", "x"); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("Disable of a missing automation: %v", err)
		}

		if err := s.Delete(ctx, other.ID, a.ID); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("Delete from another agent: %v, want ErrAutomationNotFound", err)
		}
		if err := s.Delete(ctx, ag.ID, a.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, ag.ID, a.ID); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("Get after Delete: %v", err)
		}
		if err := s.Delete(ctx, ag.ID, a.ID); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("Delete twice: %v", err)
		}
	})
}

func TestAutomationsListOwnerScope(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		other := mustCreateAgent(t, db, "other")
		s := registry.NewAutomations(db)
		var scoped []string
		for i := range 3 {
			scoped = append(scoped, mustCreateAutomation(t, s, ag.ID, "scope-1", fmt.Sprint("s", i), nil).ID)
		}
		user := mustCreateAutomation(t, s, ag.ID, "u-2", "mine", nil)
		agentLevel := mustCreateAutomation(t, s, ag.ID, "", "ops", nil)
		mustCreateAutomation(t, s, other.ID, "scope-1", "elsewhere", nil)

		// Pages of 2, newest first, only scope-1's of this agent.
		var got []string
		var before registry.Cursor
		for page := 0; ; page++ {
			items, next, err := s.List(ctx, ag.ID, "scope-1", registry.AutomationQuery{Limit: 2, Before: before})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(items)...)
			if next.IsZero() {
				break
			}
			if page > 3 {
				t.Fatal("List never ends")
			}
			before = next
		}
		if len(got) != 3 {
			t.Fatalf("List(scope-1) = %v, want the 3 of %v", got, scoped)
		}
		for _, id := range scoped {
			found := false
			for _, g := range got {
				found = found || g == id
			}
			if !found {
				t.Errorf("List(scope-1) = %v, lacks %s", got, id)
			}
		}
		for scope, want := range map[string][]string{"u-2": {user.ID}, "": {agentLevel.ID}, "nobody": {}} {
			items, _, err := s.List(ctx, ag.ID, scope, registry.AutomationQuery{})
			if err != nil || !equalIDs(ids(items), want) {
				t.Errorf("List(%q) = %v, %v; want %v", scope, ids(items), err, want)
			}
		}
		if _, _, err := s.List(ctx, other.ID, "scope-1", registry.AutomationQuery{Before: before}); before.IsZero() || !errors.Is(err, registry.ErrBadCursor) {
			t.Errorf("List with another agent's cursor: %v, want ErrBadCursor", err)
		}
	})
}

func TestAutomationsDue(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
		late := mustCreateAutomation(t, s, ag.ID, "", "late", at(-time.Minute))
		oldest := mustCreateAutomation(t, s, ag.ID, "", "oldest", at(-3*time.Hour))
		exact := mustCreateAutomation(t, s, ag.ID, "", "exact", at(0))
		mustCreateAutomation(t, s, ag.ID, "", "future", at(time.Second))
		mustCreateAutomation(t, s, ag.ID, "", "event", nil)
		paused := mustCreateAutomation(t, s, ag.ID, "", "paused", at(-2*time.Hour))
		off := false
		if _, err := s.Update(ctx, ag.ID, paused.ID, registry.AutomationUpdate{Enabled: &off}); err != nil {
			t.Fatal(err)
		}
		revoked := mustCreateAutomation(t, s, ag.ID, "", "revoked", at(-2*time.Hour))
		if err := s.Disable(ctx, revoked.ID, "revoked"); err != nil {
			t.Fatal(err)
		}

		due, err := s.Due(ctx, now, 0)
		if want := []string{oldest.ID, late.ID, exact.ID}; err != nil || !equalIDs(ids(due), want) {
			t.Errorf("Due = %v, %v; want %v (oldest first, enabled only)", ids(due), err, want)
		}
		due, err = s.Due(ctx, now, 2)
		if want := []string{oldest.ID, late.ID}; err != nil || !equalIDs(ids(due), want) {
			t.Errorf("Due(limit 2) = %v, %v; want %v", ids(due), err, want)
		}
		// A claim moves the next fire time out of the window.
		if ok, err := s.ClaimFire(ctx, oldest.ID, *oldest.NextFireAt, at(time.Hour)); !ok || err != nil {
			t.Fatalf("ClaimFire = %v, %v", ok, err)
		}
		due, err = s.Due(ctx, now, 0)
		if want := []string{late.ID, exact.ID}; err != nil || !equalIDs(ids(due), want) {
			t.Errorf("Due after a claim = %v, %v; want %v", ids(due), err, want)
		}
	})
}

func TestAutomationsClaimFire(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		next := tick.Add(5 * time.Minute)
		a := mustCreateAutomation(t, s, ag.ID, "", "every", &tick)

		if ok, err := s.ClaimFire(ctx, a.ID, tick, &next); !ok || err != nil {
			t.Fatalf("first ClaimFire = %v, %v; want true", ok, err)
		}
		later := next.Add(time.Hour)
		if ok, err := s.ClaimFire(ctx, a.ID, tick.In(time.FixedZone("CET", 3600)), &later); ok || err != nil {
			t.Fatalf("second ClaimFire of the same tick = %v, %v; want false, nil", ok, err)
		}
		got, err := s.Get(ctx, ag.ID, a.ID)
		if err != nil || got.NextFireAt == nil || !got.NextFireAt.Equal(next) || got.LastFireAt == nil || !got.LastFireAt.Equal(tick) {
			t.Errorf("after the claims: next %v, last %v, %v; want next %v (the losing claim changes nothing), last %v",
				got.NextFireAt, got.LastFireAt, err, next, tick)
		}
		if _, err := s.ClaimFire(ctx, "au-missing", tick, nil); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("ClaimFire of a missing automation: %v, want ErrAutomationNotFound", err)
		}

		// 8 workers racing on one tick: exactly one claims it.
		tick2 := next
		if won := racingWins(t, "ClaimFire", func() (bool, error) {
			after := tick2.Add(5 * time.Minute)
			return s.ClaimFire(ctx, a.ID, tick2, &after)
		}); won != 1 {
			t.Errorf("%d of 8 racing claims won the tick, want exactly 1", won)
		}
		fires, _, err := s.ListFires(ctx, a.ID, registry.FireQuery{})
		if err != nil || len(fires) != 2 || !fires[0].FireTime.Equal(tick2) || !fires[1].FireTime.Equal(tick) || fires[0].Status != registry.FireQueued {
			t.Errorf("ListFires = %+v, %v; want the 2 fires, newest first, queued", fires, err)
		}
	})
}

func TestAutomationsCascade(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		keep := mustCreateAgent(t, db, "keep")
		s := registry.NewAutomations(db)
		tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		a := mustCreateAutomation(t, s, ag.ID, "", "gone", &tick)
		k := mustCreateAutomation(t, s, keep.ID, "", "kept", &tick)
		for _, id := range []string{a.ID, k.ID} {
			if ok, err := s.ClaimFire(ctx, id, tick, nil); !ok || err != nil {
				t.Fatalf("ClaimFire = %v, %v", ok, err)
			}
			if _, err := s.SeenEvent(ctx, id, "ev1"); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.WithContext(ctx).Exec("DELETE FROM agents WHERE id = ?", ag.ID).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := s.ByID(ctx, a.ID); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("ByID after its agent was deleted: %v, want ErrAutomationNotFound", err)
		}
		for table, want := range map[string]int64{"automation_fires": 1, "automation_events": 1, "automations": 1} {
			var n int64
			if err := db.WithContext(ctx).Table(table).Count(&n).Error; err != nil || n != want {
				t.Errorf("%s rows after the agent's delete = %d, %v; want %d (only the kept agent's)", table, n, err, want)
			}
		}
		if _, err := s.ByID(ctx, k.ID); err != nil {
			t.Errorf("the other agent's automation: %v", err)
		}
	})
}

func TestAutomationsDueAfter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		var want []string
		for i := range 7 {
			at := now.Add(-time.Duration(7-i/2) * time.Minute) // pairs share a next fire time
			want = append(want, mustCreateAutomation(t, s, ag.ID, "", fmt.Sprint("a", i), &at).ID)
		}
		// Pages of 3 reach each once, also when nothing moves between pages.
		var got []string
		var after *registry.Automation
		for page := 0; ; page++ {
			due, err := s.DueAfter(ctx, now, after, 3)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(due)...)
			if len(due) < 3 {
				break
			}
			if page > 3 {
				t.Fatal("DueAfter never ends")
			}
			after = &due[len(due)-1]
		}
		due, err := s.Due(ctx, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !equalIDs(got, ids(due)) || len(got) != len(want) {
			t.Errorf("DueAfter pages = %v, want Due's order %v (of %d)", got, ids(due), len(want))
		}
	})
}

func TestAutomationsAdvanceNext(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		from := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		to := from.Add(time.Hour)
		a := mustCreateAutomation(t, s, ag.ID, "", "hourly", &from)
		if ok, err := s.AdvanceNext(ctx, a.ID, &from, &to); !ok || err != nil {
			t.Fatalf("AdvanceNext(from, to) = %v, %v; want true", ok, err)
		}
		if ok, err := s.AdvanceNext(ctx, a.ID, &from, nil); ok || err != nil {
			t.Errorf("AdvanceNext from a stale value = %v, %v; want false, nil", ok, err)
		}
		if got, err := s.ByID(ctx, a.ID); err != nil || got.NextFireAt == nil || !got.NextFireAt.Equal(to) || got.LastFireAt != nil {
			t.Errorf("after AdvanceNext: next %v, last %v, %v; want next %v, no last fire", got.NextFireAt, got.LastFireAt, err, to)
		}
		if ok, err := s.AdvanceNext(ctx, a.ID, &to, nil); !ok || err != nil {
			t.Errorf("AdvanceNext(to, nil) = %v, %v; want true", ok, err)
		}
		if ok, err := s.AdvanceNext(ctx, a.ID, nil, &from); !ok || err != nil {
			t.Errorf("AdvanceNext(nil, from) = %v, %v; want true", ok, err)
		}
		if ok, err := s.AdvanceNext(ctx, "au-missing", &from, nil); ok || err != nil {
			t.Errorf("AdvanceNext of a missing automation = %v, %v; want false, nil", ok, err)
		}

		// 8 scans racing to move one next fire time: exactly one wins.
		if won := racingWins(t, "AdvanceNext", func() (bool, error) { return s.AdvanceNext(ctx, a.ID, &from, &to) }); won != 1 {
			t.Errorf("%d of 8 racing AdvanceNext won, want exactly 1", won)
		}
	})
}

func TestAutomationsClaimFires(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		next := tick.Add(time.Minute)
		a := mustCreateAutomation(t, s, ag.ID, "", "a", &tick)
		b := mustCreateAutomation(t, s, ag.ID, "", "b", &tick)
		if ok, err := s.ClaimFire(ctx, b.ID, tick, &next); !ok || err != nil {
			t.Fatalf("ClaimFire of b = %v, %v", ok, err)
		}
		later := next.Add(time.Hour)
		won, err := s.ClaimFires(ctx, []registry.FireClaim{
			{AutomationID: b.ID, FireTime: tick, NextFire: &later}, // claimed already
			{AutomationID: "au-missing", FireTime: tick, NextFire: &later},
			{AutomationID: a.ID, FireTime: tick, NextFire: &next},
		})
		if err != nil || fmt.Sprint(won) != "[false false true]" {
			t.Fatalf("ClaimFires = %v, %v; want [false false true]", won, err)
		}
		for _, id := range []string{a.ID, b.ID} {
			got, err := s.Get(ctx, ag.ID, id)
			if err != nil || got.NextFireAt == nil || !got.NextFireAt.Equal(next) || got.LastFireAt == nil || !got.LastFireAt.Equal(tick) {
				t.Errorf("%s after the claims: next %v, last %v, %v; want next %v (a lost claim changes nothing), last %v",
					id, got.NextFireAt, got.LastFireAt, err, next, tick)
			}
		}

		// 8 callers racing on the same page (in different orders): each fire is won once.
		var autos []registry.Automation
		for i := range 20 {
			autos = append(autos, mustCreateAutomation(t, s, ag.ID, "", fmt.Sprintf("race %d", i), &next))
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := map[string]int{}
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var claims []registry.FireClaim
				for i := range autos {
					x := autos[(i+w*3)%len(autos)]
					claims = append(claims, registry.FireClaim{AutomationID: x.ID, FireTime: next, NextFire: &later})
				}
				won, err := s.ClaimFires(ctx, claims)
				if err != nil {
					t.Errorf("racing ClaimFires: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i, ok := range won {
					if ok {
						wins[claims[i].AutomationID]++
					}
				}
			}()
		}
		wg.Wait()
		for _, x := range autos {
			if wins[x.ID] != 1 {
				t.Errorf("automation %s won %d times by 8 racing pages, want exactly 1", x.ID, wins[x.ID])
			}
		}
	})
}
