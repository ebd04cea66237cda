package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// SeeDeliveries records a batch at once: a delivery seen before, or twice in the batch, is a
// duplicate; an error of within records nothing of the batch.
func TestChannelSeeDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewChannels(db)
		if _, err := s.SeeDelivery(ctx, "ag1", "slack", "Ev0"); err != nil {
			t.Fatal(err)
		}
		key := func(id string) registry.DeliveryKey {
			return registry.DeliveryKey{AgentID: "ag1", Channel: "slack", DeliveryID: id}
		}
		boom := errors.New("boom")
		if _, err := s.SeeDeliveries(ctx, []registry.DeliveryKey{key("Ev1"), key("Ev2")}, func(*gorm.DB, []int) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("SeeDeliveries with a failing within = %v, want boom", err)
		}
		var within []int
		dup, err := s.SeeDeliveries(ctx, []registry.DeliveryKey{key("Ev0"), key("Ev1"), key("Ev2"), key("Ev1")}, func(_ *gorm.DB, recorded []int) error {
			within = append(within, recorded...)
			return nil
		})
		if err != nil || !slices.Equal(dup, []bool{true, false, false, true}) || !slices.Equal(within, []int{1, 2}) {
			t.Errorf("SeeDeliveries = %v, %v, within %v; want [true false false true], within [1 2]", dup, err, within)
		}
		if dup, err := s.SeeDelivery(ctx, "ag1", "slack", "Ev2"); err != nil || !dup {
			t.Errorf("SeeDelivery after the batch = %v, %v; want a duplicate", dup, err)
		}
		// The keys travel as JSON: quotes, backslashes and any text come back as they went.
		odd := key(`Ev"3\ü` + "\n")
		if dup, err := s.SeeDeliveries(ctx, []registry.DeliveryKey{odd}, nil); err != nil || !slices.Equal(dup, []bool{false}) {
			t.Errorf("SeeDeliveries of %q = %v, %v; want recorded", odd.DeliveryID, dup, err)
		}
		if dup, err := s.SeeDelivery(ctx, "ag1", "slack", odd.DeliveryID); err != nil || !dup {
			t.Errorf("SeeDelivery of %q after the batch = %v, %v; want a duplicate", odd.DeliveryID, dup, err)
		}
		// A batch's rows carry their time like the others: pruned past it, kept before.
		if n, err := s.PruneDeliveries(ctx, time.Now().Add(-time.Minute)); err != nil || n != 0 {
			t.Errorf("PruneDeliveries a minute ago = %d, %v; want 0", n, err)
		}
		if n, err := s.PruneDeliveries(ctx, time.Now().Add(time.Minute)); err != nil || n != 4 {
			t.Errorf("PruneDeliveries in a minute = %d, %v; want 4 (Ev0, Ev1, Ev2 and the odd one)", n, err)
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

// A stale entry is requeued once, by one sweep; a claimed entry is not claimed again, and is
// stale once its claim ran out; a sent entry is never stale.
func TestChannelOutboxStale(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewChannels(db)
		entry := func(key string) registry.OutboxEntry {
			return registry.OutboxEntry{AgentID: "ag1", Channel: "slack", IdempotencyKey: key, Request: json.RawMessage(`{"method":"chat.postMessage"}`)}
		}
		added, err := s.AddOutbox(ctx, []registry.OutboxEntry{entry("k:000"), entry("k:001"), entry("k:002")})
		if err != nil {
			t.Fatal(err)
		}
		lost, claimed, sent := added[0], added[1], added[2]
		if err := s.MarkSent(ctx, sent.ID); err != nil {
			t.Fatal(err)
		}
		if stale, err := s.StaleOutbox(ctx, time.Now().Add(-time.Hour), 10); err != nil || len(stale) != 0 {
			t.Fatalf("StaleOutbox within the window = %+v, %v; want none", stale, err)
		}
		if ok, err := s.ClaimOutbox(ctx, claimed.ID, time.Now().Add(time.Hour)); err != nil || !ok {
			t.Fatalf("ClaimOutbox = %v, %v", ok, err)
		}
		if ok, err := s.ClaimOutbox(ctx, claimed.ID, time.Now().Add(time.Hour)); err != nil || ok {
			t.Errorf("a second ClaimOutbox = %v, %v; want false", ok, err)
		}
		before := time.Now().Add(time.Minute) // as if the window had passed
		stale, err := s.StaleOutbox(ctx, before, 10)
		if err != nil || len(stale) != 1 || stale[0].ID != lost.ID {
			t.Fatalf("StaleOutbox = %+v, %v; want the unclaimed pending entry", stale, err)
		}
		if ok, err := s.Requeue(ctx, lost.ID, before); err != nil || !ok {
			t.Fatalf("Requeue = %v, %v", ok, err)
		}
		if ok, err := s.Requeue(ctx, lost.ID, time.Now().Add(-time.Minute)); err != nil || ok {
			t.Errorf("a second sweep's Requeue = %v, %v; want false", ok, err)
		}
		// A claim that ran out is stale; ending it (Postpone) makes the entry pending.
		if ok, err := s.ClaimOutbox(ctx, lost.ID, time.Now().Add(-time.Second)); err != nil || !ok {
			t.Fatalf("ClaimOutbox of the requeued entry = %v, %v", ok, err)
		}
		stale, err = s.StaleOutbox(ctx, time.Now().Add(-time.Hour), 10)
		if err != nil || len(stale) != 1 || stale[0].ID != lost.ID || stale[0].Status != registry.OutboxSending {
			t.Fatalf("StaleOutbox = %+v, %v; want the entry whose claim ran out", stale, err)
		}
		if err := s.Postpone(ctx, claimed.ID, time.Now(), "timeout"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Outbox(ctx, claimed.ID); err != nil || got.Status != registry.OutboxPending || got.Attempts != 1 {
			t.Errorf("claimed entry after Postpone = %+v, %v; want pending, one attempt", got, err)
		}
	})
}

// A question's option values come back in order; a second AddQuestion keeps the first values.
func TestChannelQuestions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewChannels(db)
		if _, err := s.Question(ctx, "ag1", "ask_1"); !errors.Is(err, registry.ErrQuestionNotFound) {
			t.Fatalf("Question before AddQuestion: %v, want ErrQuestionNotFound", err)
		}
		for _, values := range [][]string{{"free", "pro"}, {"other"}} {
			if err := s.AddQuestion(ctx, "ag1", "ask_1", values); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.Question(ctx, "ag1", "ask_1"); err != nil || !slices.Equal(got, []string{"free", "pro"}) {
			t.Errorf("Question = %q, %v; want [free pro]", got, err)
		}
		if _, err := s.Question(ctx, "ag2", "ask_1"); !errors.Is(err, registry.ErrQuestionNotFound) {
			t.Errorf("another agent's Question: %v, want ErrQuestionNotFound", err)
		}
		if n, err := s.PruneQuestions(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
			t.Errorf("PruneQuestions = %d, %v; want 1", n, err)
		}
	})
}

// BenchmarkSeeDeliveries records a batch of 200 new deliveries per op, as the channels'
// intake does under a burst.
//
//	go test -run '^$' -bench BenchmarkSeeDeliveries -benchtime 200x ./registry/
func BenchmarkSeeDeliveries(b *testing.B) {
	for name, open := range map[string]func(testing.TB) *gorm.DB{"sqlite": dbtest.SQLite, "postgres": dbtest.Postgres} {
		b.Run(name, func(b *testing.B) {
			s := registry.NewChannels(open(b))
			ctx := context.Background()
			keys := make([]registry.DeliveryKey, 200)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range keys {
					n++
					keys[i] = registry.DeliveryKey{AgentID: "ag1", Channel: "slack", DeliveryID: fmt.Sprintf("Ev%08d", n)}
				}
				if _, err := s.SeeDeliveries(ctx, keys, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
