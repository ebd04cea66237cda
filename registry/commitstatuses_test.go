package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

func TestCommitStatuses(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewCommitStatuses(db)
		a := mustCreateAgent(t, db, "one")
		b := mustCreateAgent(t, db, "two")
		sha := strings.Repeat("ab", 20)

		if _, err := s.Latest(ctx, a.ID, sha, registry.EvalsContext); !errors.Is(err, registry.ErrCommitStatusNotFound) {
			t.Fatalf("Latest before Add = %v, want ErrCommitStatusNotFound", err)
		}
		for _, st := range []registry.CommitState{registry.StatePending, registry.StateFailure, registry.StateSuccess} {
			if _, err := s.Add(ctx, registry.CommitStatus{AgentID: a.ID, Commit: strings.ToUpper(sha), Context: registry.EvalsContext, State: st}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Add(ctx, registry.CommitStatus{AgentID: a.ID, Commit: sha, Context: "ci/lint", State: registry.StateError, Description: "lint broke"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Add(ctx, registry.CommitStatus{AgentID: b.ID, Commit: sha, Context: registry.EvalsContext, State: registry.StateFailure}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Latest(ctx, a.ID, sha, registry.EvalsContext)
		if err != nil || got.State != registry.StateSuccess || got.Commit != sha {
			t.Errorf("Latest = %+v, %v; want success", got, err)
		}
		got, err = s.Latest(ctx, a.ID, strings.ToUpper(sha), "ci/lint")
		if err != nil || got.State != registry.StateError || got.Description != "lint broke" {
			t.Errorf("Latest(ci/lint) = %+v, %v", got, err)
		}
		if got, _ := s.Latest(ctx, b.ID, sha, registry.EvalsContext); got.State != registry.StateFailure {
			t.Errorf("Latest for agent b = %+v, want failure", got)
		}

		sha256 := strings.Repeat("0f", 32)
		if _, err := s.Add(ctx, registry.CommitStatus{AgentID: a.ID, Commit: sha256, Context: "c", State: registry.StatePending}); err != nil {
			t.Errorf("Add with a SHA-256 commit: %v", err)
		}
		tests := []struct {
			name  string
			st    registry.CommitStatus
			field string
		}{
			{"short commit", registry.CommitStatus{Commit: "abc123", Context: "c", State: "pending"}, "commit"},
			{"non-hex commit", registry.CommitStatus{Commit: strings.Repeat("g", 40), Context: "c", State: "pending"}, "commit"},
			{"no context", registry.CommitStatus{Commit: sha, State: "pending"}, "context"},
			{"long context", registry.CommitStatus{Commit: sha, Context: strings.Repeat("c", registry.MaxStatusContextLen+1), State: "pending"}, "context"},
			{"no state", registry.CommitStatus{Commit: sha, Context: "c"}, "state"},
			{"bad state", registry.CommitStatus{Commit: sha, Context: "c", State: "done"}, "state"},
			{"long description", registry.CommitStatus{Commit: sha, Context: "c", State: "pending", Description: strings.Repeat("d", registry.MaxStatusDescriptionLen+1)}, "description"},
		}
		for _, tt := range tests {
			tt.st.AgentID = a.ID
			_, err := s.Add(ctx, tt.st)
			var ie *registry.InvalidError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Errorf("%s: Add = %v, want an InvalidError for %s", tt.name, err, tt.field)
			}
		}
		if _, err := s.Add(ctx, registry.CommitStatus{AgentID: a.ID, Commit: sha, Context: strings.Repeat("c", registry.MaxStatusContextLen), State: "pending", Description: strings.Repeat("d", registry.MaxStatusDescriptionLen)}); err != nil {
			t.Errorf("Add at the limits: %v", err)
		}
		if _, err := s.Add(ctx, registry.CommitStatus{AgentID: "anosuchagent", Commit: sha, Context: "c", State: "pending"}); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("Add for a missing agent = %v, want ErrAgentNotFound", err)
		}
	})
}
