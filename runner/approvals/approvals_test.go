package approvals_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/runner/approvals"
)

// Each store decides an approval once, whoever asks first, and only for its own session.
func TestStores(t *testing.T) {
	run := func(t *testing.T, s approvals.Store) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		a := approvals.Approval{ID: "apr_1", AgentID: "agt", SessionID: "ses", ToolName: "refund", ToolID: "c1", Status: approvals.Pending, CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
		if err := s.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decide(ctx, "agt", "other", "apr_1", approvals.Approved, now); !errors.Is(err, approvals.ErrNotFound) {
			t.Errorf("another session decided it: %v", err)
		}
		if _, err := s.Decide(ctx, "other", "ses", "apr_1", approvals.Approved, now); !errors.Is(err, approvals.ErrNotFound) {
			t.Errorf("another agent decided it: %v", err)
		}
		if _, err := s.Get(ctx, "apr_none"); !errors.Is(err, approvals.ErrNotFound) {
			t.Errorf("get unknown: %v", err)
		}
		var wg sync.WaitGroup
		wins := make(chan string, 8)
		for _, status := range []string{approvals.Approved, approvals.Denied, approvals.Expired, approvals.Cancelled, approvals.Approved, approvals.Denied, approvals.Expired, approvals.Cancelled} {
			wg.Go(func() {
				got, err := s.Decide(ctx, "agt", "ses", "apr_1", status, now)
				switch {
				case err == nil:
					wins <- got.Status
				case !errors.Is(err, approvals.ErrDecided):
					t.Errorf("decide: %v", err)
				}
			})
		}
		wg.Wait()
		close(wins)
		var won []string
		for w := range wins {
			won = append(won, w)
		}
		got, err := s.Get(ctx, "apr_1")
		if len(won) != 1 || err != nil || got.Status != won[0] || got.DecidedAt.IsZero() {
			t.Errorf("winners %v; stored %+v, %v", won, got, err)
		}
	}
	t.Run("memory", func(t *testing.T) { run(t, &approvals.Memory{}) })
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) { run(t, approvals.NewDB(db)) })
}

// An answer that comes before the turn starts waiting is found at once, not at the next poll.
func TestDecidedBeforeWait(t *testing.T) {
	h, err := approvals.NewHub(context.Background(), approvals.HubConfig{Store: &approvals.Memory{}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	a, err := h.Request(context.Background(), approvals.Approval{ID: "apr_x", SessionID: "s", ToolName: "t", ToolID: "c"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Decide(context.Background(), "", "s", "apr_x", approvals.Approved); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := h.Wait(ctx, a)
	if err != nil || got.Status != approvals.Approved {
		t.Fatalf("Wait = %+v, %v; want approved at once", got, err)
	}
}
