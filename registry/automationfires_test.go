package registry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

func TestAutomationsFires(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		base := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		a := mustCreateAutomation(t, s, ag.ID, "", "every", &base)
		var ticks []time.Time
		for i := range 5 {
			tick := base.Add(time.Duration(i) * time.Minute)
			ticks = append(ticks, tick)
			if ok, err := s.ClaimFire(ctx, a.ID, tick, nil); !ok || err != nil {
				t.Fatalf("ClaimFire(%v) = %v, %v", tick, ok, err)
			}
		}
		started, ended := base.Add(time.Second), base.Add(time.Minute)
		if err := s.UpdateFire(ctx, a.ID, ticks[0], registry.FireUpdate{Status: registry.FireRunning, SessionID: "s1", StartedAt: &started}); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateFire(ctx, a.ID, ticks[0], registry.FireUpdate{Status: registry.FireDone, DoneReason: "model_stop", EndedAt: &ended}); err != nil {
			t.Fatal(err)
		}
		f, err := s.GetFire(ctx, a.ID, ticks[0])
		if err != nil || f.Status != registry.FireDone || f.SessionID != "s1" || f.DoneReason != "model_stop" ||
			f.StartedAt == nil || !f.StartedAt.Equal(started) || f.EndedAt == nil || !f.EndedAt.Equal(ended) || f.FiredAt.IsZero() {
			t.Errorf("GetFire = %+v, %v", f, err)
		}
		if err := s.UpdateFire(ctx, a.ID, base.Add(time.Hour), registry.FireUpdate{Status: registry.FireFailed}); !errors.Is(err, registry.ErrFireNotFound) {
			t.Errorf("UpdateFire of an unclaimed tick: %v, want ErrFireNotFound", err)
		}
		if _, err := s.GetFire(ctx, a.ID, base.Add(time.Hour)); !errors.Is(err, registry.ErrFireNotFound) {
			t.Errorf("GetFire of an unclaimed tick: %v, want ErrFireNotFound", err)
		}

		// Pages of 2, newest first.
		var got []time.Time
		var before registry.Cursor
		for page := 0; ; page++ {
			fires, next, err := s.ListFires(ctx, a.ID, registry.FireQuery{Limit: 2, Before: before})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fires {
				got = append(got, f.FireTime)
			}
			if next.IsZero() {
				break
			}
			if page > 3 {
				t.Fatal("ListFires never ends")
			}
			if back, err := registry.ParseCursor(next.String()); err != nil || back != next {
				t.Fatalf("ParseCursor(%v) = %v, %v", next, back, err)
			}
			before = next
		}
		if len(got) != len(ticks) {
			t.Fatalf("ListFires = %v, want %d fires", got, len(ticks))
		}
		for i, tick := range got {
			if want := ticks[len(ticks)-1-i]; !tick.Equal(want) {
				t.Errorf("ListFires[%d] = %v, want %v", i, tick, want)
			}
		}
		if _, _, err := s.ListFires(ctx, "au-other", registry.FireQuery{Before: before}); !errors.Is(err, registry.ErrBadCursor) {
			t.Errorf("ListFires with another automation's cursor: %v, want ErrBadCursor", err)
		}
	})
}

func TestAutomationsSeenEvent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		a := mustCreateAutomation(t, s, ag.ID, "", "hook", nil)
		b := mustCreateAutomation(t, s, ag.ID, "", "hook2", nil)
		for _, c := range []struct {
			automation, event string
			want              bool
		}{{a.ID, "ev1", false}, {a.ID, "ev1", true}, {a.ID, "ev2", false}, {b.ID, "ev1", false}, {b.ID, "ev1", true}} {
			if dup, err := s.SeenEvent(ctx, c.automation, c.event); dup != c.want || err != nil {
				t.Errorf("SeenEvent(%s, %s) = %v, %v; want %v", c.automation, c.event, dup, err, c.want)
			}
		}
		if _, err := s.SeenEvent(ctx, "au-missing", "ev1"); err == nil {
			t.Error("SeenEvent of a missing automation succeeded")
		}
		n, err := s.PruneEvents(ctx, time.Now().Add(time.Hour))
		if err != nil || n != 3 {
			t.Errorf("PruneEvents = %d, %v; want 3", n, err)
		}
		if dup, err := s.SeenEvent(ctx, a.ID, "ev1"); dup || err != nil {
			t.Errorf("SeenEvent after PruneEvents = %v, %v; want false", dup, err)
		}
	})
}

func TestAutomationsRecordFire(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		next := time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)
		a := mustCreateAutomation(t, s, ag.ID, "", "hook", &next)
		// A run-now at a time with nanoseconds: kept to the microsecond, found by the same time.
		at := time.Date(2026, 11, 26, 12, 0, 0, 123456789, time.UTC)
		if ok, err := s.RecordFire(ctx, a.ID, at, "run", nil); !ok || err != nil {
			t.Fatalf("RecordFire = %v, %v; want true", ok, err)
		}
		if ok, err := s.RecordFire(ctx, a.ID, at.Truncate(time.Microsecond), "run", nil); ok || err != nil {
			t.Errorf("RecordFire of the same fire = %v, %v; want false, nil", ok, err)
		}
		f, err := s.GetFire(ctx, a.ID, at)
		if err != nil || f.Status != registry.FireQueued || !f.FireTime.Equal(at.Truncate(time.Microsecond)) {
			t.Errorf("GetFire = %+v, %v; want the queued fire", f, err)
		}
		got, err := s.ByID(ctx, a.ID)
		if err != nil || got.NextFireAt == nil || !got.NextFireAt.Equal(next) || got.LastFireAt != nil {
			t.Errorf("after RecordFire: next %v, last %v, %v; want the schedule untouched", got.NextFireAt, got.LastFireAt, err)
		}
		if _, err := s.RecordFire(ctx, "au-missing", at, "run", nil); !errors.Is(err, registry.ErrAutomationNotFound) {
			t.Errorf("RecordFire of a missing automation: %v, want ErrAutomationNotFound", err)
		}
	})
}

func TestAutomationsStartFire(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		s := registry.NewAutomations(db)
		base := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		a := mustCreateAutomation(t, s, ag.ID, "", "every", nil)
		ticks := []time.Time{base, base.Add(time.Minute), base.Add(2 * time.Minute)}
		for _, tick := range ticks {
			if ok, err := s.RecordFire(ctx, a.ID, tick, "run", nil); !ok || err != nil {
				t.Fatalf("RecordFire = %v, %v", ok, err)
			}
		}
		started := base.Add(time.Second)
		if err := s.StartFire(ctx, a.ID, ticks[0], started, true); err != nil {
			t.Fatalf("StartFire alone with nothing running: %v", err)
		}
		if err := s.StartFire(ctx, a.ID, ticks[0], started, true); !errors.Is(err, registry.ErrFireNotQueued) {
			t.Errorf("StartFire of a running fire: %v, want ErrFireNotQueued", err)
		}
		if err := s.StartFire(ctx, a.ID, ticks[1], started, true); !errors.Is(err, registry.ErrFireBusy) {
			t.Errorf("StartFire alone while another runs: %v, want ErrFireBusy", err)
		}
		if f, err := s.GetFire(ctx, a.ID, ticks[1]); err != nil || f.Status != registry.FireQueued {
			t.Errorf("the busy fire = %+v, %v; want it still queued", f, err)
		}
		if err := s.StartFire(ctx, a.ID, ticks[1], started, false); err != nil {
			t.Errorf("StartFire alongside: %v", err)
		}
		if err := s.StartFire(ctx, a.ID, base.Add(time.Hour), started, false); !errors.Is(err, registry.ErrFireNotFound) {
			t.Errorf("StartFire of a missing fire: %v, want ErrFireNotFound", err)
		}
		running, err := s.RunningFires(ctx, a.ID)
		if err != nil || len(running) != 2 || !running[0].FireTime.Equal(ticks[0]) || !running[1].FireTime.Equal(ticks[1]) ||
			running[0].StartedAt == nil || !running[0].StartedAt.Equal(started) {
			t.Errorf("RunningFires = %+v, %v; want the first two, started", running, err)
		}

		// 8 fires racing to start alone: exactly one starts.
		for _, tick := range ticks[:2] {
			if err := s.UpdateFire(ctx, a.ID, tick, registry.FireUpdate{Status: registry.FireDone}); err != nil {
				t.Fatal(err)
			}
		}
		var race []time.Time
		for i := range 8 {
			race = append(race, base.Add(time.Hour+time.Duration(i)*time.Minute))
			if ok, err := s.RecordFire(ctx, a.ID, race[i], "run", nil); !ok || err != nil {
				t.Fatalf("RecordFire = %v, %v", ok, err)
			}
		}
		next := make(chan time.Time, len(race))
		for _, tick := range race {
			next <- tick
		}
		won := racingWins(t, "StartFire", func() (bool, error) {
			err := s.StartFire(ctx, a.ID, <-next, started, true)
			if errors.Is(err, registry.ErrFireBusy) {
				return false, nil
			}
			return err == nil, err
		})
		if won != 1 {
			t.Errorf("%d of 8 fires racing to start alone started, want exactly 1", won)
		}
	})
}

func TestAutomationsStaleQueuedFires(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		ag := mustCreateAgent(t, db, "desk")
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		s := registry.NewAutomations(db).WithClock(func() time.Time { return now })
		a := mustCreateAutomation(t, s, ag.ID, "", "a", nil)
		busy := mustCreateAutomation(t, s, ag.ID, "", "busy", nil)
		fire := func(id string, tick time.Time) {
			t.Helper()
			if ok, err := s.RecordFire(ctx, id, tick, "run", nil); !ok || err != nil {
				t.Fatalf("RecordFire = %v, %v", ok, err)
			}
		}
		fire(a.ID, now)                     // fired at 12:00, queued
		fire(busy.ID, now)                  // fired at 12:00, running
		fire(busy.ID, now.Add(time.Minute)) // fired at 12:00, waits behind the running one
		if err := s.StartFire(ctx, busy.ID, now, now, true); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
		fire(a.ID, now) // fired at 12:01

		stale, err := s.StaleQueuedFires(ctx, now, 0)
		if err != nil || len(stale) != 1 || stale[0].AutomationID != a.ID || !stale[0].FireTime.Equal(now.Add(-time.Minute)) {
			t.Errorf("StaleQueuedFires(12:01) = %+v, %v; want a's fire of 12:00 only (not busy's, waiting its turn)", stale, err)
		}
		if err := s.UpdateFire(ctx, busy.ID, now.Add(-time.Minute), registry.FireUpdate{Status: registry.FireDone}); err != nil {
			t.Fatal(err)
		}
		stale, err = s.StaleQueuedFires(ctx, now.Add(time.Second), 0)
		if err != nil || len(stale) != 3 {
			t.Errorf("StaleQueuedFires(12:01:01) = %+v, %v; want the 3 queued fires", stale, err)
		}
		if stale, err = s.StaleQueuedFires(ctx, now.Add(time.Second), 1); err != nil || len(stale) != 1 {
			t.Errorf("StaleQueuedFires(limit 1) = %d fires, %v", len(stale), err)
		}
	})
}
