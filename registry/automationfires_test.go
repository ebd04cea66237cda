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
