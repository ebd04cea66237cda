package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

func TestEvalRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewEvalRuns(db)
		if _, err := s.Latest(ctx, "d1"); !errors.Is(err, registry.ErrNoEvalRun) {
			t.Fatalf("latest of none: %v", err)
		}
		r, err := s.Create(ctx, "a1", "d1", "abc123")
		if err != nil || r.State != registry.EvalQueued {
			t.Fatalf("create: %+v, %v", r, err)
		}
		if err := s.SetRunning(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, r.ID, registry.EvalFailure, json.RawMessage(`{"state":"failure"}`), ""); err != nil {
			t.Fatal(err)
		}
		got, err := s.Latest(ctx, "d1")
		if err != nil || got.ID != r.ID || got.State != registry.EvalFailure || string(got.Result) != `{"state":"failure"}` || got.FinishedAt == nil || got.CommitSHA != "abc123" {
			t.Errorf("latest: %+v, %v", got, err)
		}
	})
}
