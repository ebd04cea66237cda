// Package sessionstest is the conformance suite of access.Sessions: every implementation (memory,
// the platform's database) runs it from its own tests.
package sessionstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/access"
)

// Run checks the contract of access.Sessions on stores made by newStore, one per sub-test.
func Run(t *testing.T, newStore func(t *testing.T) access.Sessions) {
	ctx := context.Background()
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	record := func() access.BrowserSession {
		_, id := access.NewSessionCookie()
		return access.BrowserSession{
			ID: id, AgentID: "agt_1", UserID: "u-1", Email: "ada@example.com", EmailOK: true,
			OrgID: "org-1", Groups: []string{"eng", "ops"}, Scope: "s1",
			CreatedAt: created, ExpiresAt: created.Add(access.SessionTTL),
		}
	}

	t.Run("CreateThenGet", func(t *testing.T) {
		st := newStore(t)
		want := record()
		if err := st.Create(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := st.Get(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, timeEqual()); diff != "" {
			t.Errorf("Get (-want +got):\n%s", diff)
		}
	})

	t.Run("GetUnknown", func(t *testing.T) {
		st := newStore(t)
		if _, err := st.Get(ctx, "nope"); !errors.Is(err, access.ErrSessionNotFound) {
			t.Errorf("Get(unknown) = %v, want ErrSessionNotFound", err)
		}
	})

	t.Run("EndKeepsTheFirstEnd", func(t *testing.T) {
		st := newStore(t)
		s := record()
		if err := st.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		first := created.Add(time.Hour)
		if err := st.End(ctx, s.ID, first); err != nil {
			t.Fatal(err)
		}
		if err := st.End(ctx, s.ID, first.Add(time.Hour)); err != nil {
			t.Errorf("End of an ended session = %v, want nil", err)
		}
		got, err := st.Get(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.EndedAt.Equal(first) {
			t.Errorf("EndedAt = %v, want %v", got.EndedAt, first)
		}
	})

	t.Run("EndUnknown", func(t *testing.T) {
		st := newStore(t)
		if err := st.End(ctx, "nope", created); !errors.Is(err, access.ErrSessionNotFound) {
			t.Errorf("End(unknown) = %v, want ErrSessionNotFound", err)
		}
	})

	t.Run("CreateTwice", func(t *testing.T) {
		st := newStore(t)
		s := record()
		if err := st.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := st.Create(ctx, s); err == nil {
			t.Error("Create of an id already held = nil, want an error")
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		st := newStore(t)
		cctx, cancel := context.WithCancelCause(ctx)
		cancel(errors.New("test over"))
		if _, err := st.Get(cctx, "x"); err == nil {
			t.Error("Get on a cancelled context = nil error")
		}
	})
}

// timeEqual compares times by instant, as a database returns them in its own location.
func timeEqual() cmp.Option {
	return cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
}
