package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

func TestChannelDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewChannels(db)
		for i, want := range []bool{false, true} {
			if dup, err := s.SeeDelivery(ctx, "ag1", "slack", "Ev1"); err != nil || dup != want {
				t.Fatalf("SeeDelivery #%d = %v, %v; want %v", i, dup, err, want)
			}
		}
		if dup, err := s.SeeDelivery(ctx, "ag2", "slack", "Ev1"); err != nil || dup {
			t.Errorf("another agent's delivery = %v, %v; want new", dup, err)
		}
		if err := s.ForgetDelivery(ctx, "ag1", "slack", "Ev1"); err != nil {
			t.Fatal(err)
		}
		if dup, err := s.SeeDelivery(ctx, "ag1", "slack", "Ev1"); err != nil || dup {
			t.Errorf("after ForgetDelivery = %v, %v; want new", dup, err)
		}
		if n, err := s.PruneDeliveries(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
			t.Errorf("PruneDeliveries = %d, %v; want 2", n, err)
		}
	})
}

func TestChannelOutbox(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewChannels(db)
		entry := func(key string) registry.OutboxEntry {
			return registry.OutboxEntry{AgentID: "ag1", Channel: "telegram", IdempotencyKey: key, Request: json.RawMessage(`{"method":"sendMessage"}`)}
		}
		first, err := s.AddOutbox(ctx, []registry.OutboxEntry{entry("ag1:d_1%:text:000"), entry("ag1:d_1%:text:001")})
		if err != nil || len(first) != 2 || first[0].Status != registry.OutboxPending || first[0].ID == "" {
			t.Fatalf("AddOutbox = %+v, %v", first, err)
		}
		if err := s.MarkSent(ctx, first[0].ID); err != nil {
			t.Fatal(err)
		}
		again, err := s.AddOutbox(ctx, []registry.OutboxEntry{entry("ag1:d_1%:text:000"), entry("ag1:d_1%:text:001"), entry("ag1:d_12:text:000")})
		if err != nil || len(again) != 3 || again[0].ID != first[0].ID || again[0].Status != registry.OutboxSent || again[1].ID != first[1].ID {
			t.Fatalf("AddOutbox again = %+v, %v; want the stored entries back", again, err)
		}
		// A sent entry stays sent.
		if err := s.MarkFailed(ctx, first[0].ID, "late"); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
		if err := s.Postpone(ctx, first[1].ID, at, "ratelimited"); err != nil {
			t.Fatal(err)
		}
		got, err := s.Outbox(ctx, first[1].ID)
		if err != nil || got.Attempts != 1 || got.LastError != "ratelimited" || !got.NextAttemptAt.Equal(at) || got.Status != registry.OutboxPending {
			t.Errorf("Outbox after Postpone = %+v, %v", got, err)
		}
		if got, err := s.Outbox(ctx, first[0].ID); err != nil || got.Status != registry.OutboxSent || got.LastError != "" {
			t.Errorf("sent entry after MarkFailed = %+v, %v; want it sent", got, err)
		}
		list, err := s.OutboxWithPrefix(ctx, "ag1:d_1%:")
		if err != nil || len(list) != 2 || list[0].ID != first[0].ID || list[1].ID != first[1].ID {
			t.Errorf("OutboxWithPrefix = %+v, %v; want the two entries of d_1%%, in order", list, err)
		}
		if _, err := s.Outbox(ctx, "obx_none"); !errors.Is(err, registry.ErrOutboxNotFound) {
			t.Errorf("Outbox of an unknown id: %v, want ErrOutboxNotFound", err)
		}
	})
}
