package registry_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

// Feedback is kept with its metadata and listed newest first, filtered by the metadata keys
// userId and screen, within one agent.
func TestFeedback(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s := registry.NewFeedback(db)
		ctx := context.Background()
		at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
		for i, f := range []registry.Feedback{
			{AgentID: "a1", SessionID: "s1", Rating: "up", Metadata: map[string]string{"userId": "u1", "screen": "home"}},
			{AgentID: "a1", SessionID: "s2", Rating: "down", Comment: "wrong", Metadata: map[string]string{"userId": "u2", "screen": "home"}},
			{AgentID: "a1", SessionID: "s3", Rating: "up", Metadata: map[string]string{"userId": "u1", "screen": "cart"}},
			{AgentID: "a2", SessionID: "s4", Rating: "up", Metadata: map[string]string{"userId": "u1"}},
		} {
			f.CreatedAt = at.Add(time.Duration(i) * time.Minute)
			if _, err := s.Add(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		sessions := func(q registry.FeedbackQuery) string {
			t.Helper()
			fs, err := s.List(ctx, "a1", q)
			if err != nil {
				t.Fatal(err)
			}
			var out string
			for _, f := range fs {
				out += f.SessionID + " "
			}
			return out
		}
		for q, want := range map[registry.FeedbackQuery]string{
			{}:                              "s3 s2 s1 ",
			{UserKey: "u1"}:                 "s3 s1 ",
			{Screen: "home"}:                "s2 s1 ",
			{UserKey: "u1", Screen: "home"}: "s1 ",
			{UserKey: "nobody"}:             "",
			{Limit: 1}:                      "s3 ",
		} {
			if got := sessions(q); got != want {
				t.Errorf("%+v: %q, want %q", q, got, want)
			}
		}
		fs, err := s.List(ctx, "a1", registry.FeedbackQuery{UserKey: "u2"})
		if err != nil || len(fs) != 1 || fs[0].Comment != "wrong" || fs[0].Metadata["screen"] != "home" || fs[0].Rating != "down" {
			t.Errorf("feedback %+v, %v", fs, err)
		}
	})
}

// The feedback list pages by (createdAt, id), newest first.
func TestFeedbackPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewFeedback(db)
		testPages(t, registry.CursorFeedback, func(base time.Time, it pageItem) {
			f := registry.Feedback{ID: it.id, AgentID: it.agent, Rating: "up", Metadata: map[string]string{"userId": it.user}, CreatedAt: base.Add(it.at)}
			if _, err := s.Add(ctx, f); err != nil {
				t.Fatal(err)
			}
		}, func(agent, user string, before registry.Cursor, limit int) ([]string, registry.Cursor, error) {
			fs, next, err := s.Page(ctx, agent, registry.FeedbackQuery{UserKey: user, Before: before, Limit: limit})
			var ids []string
			for _, f := range fs {
				ids = append(ids, f.ID)
			}
			return ids, next, err
		})
	})
}
