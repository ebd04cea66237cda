package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
)

// The runtimes record a run with the save of its turn's result (dbstore.SaveRun); the platform
// lists an agent's runs newest first, filtered by the metadata keys userId and screen, by session
// and by deployment, and a run goes with its session.
func TestRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		store := dbstore.New(db)
		at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
		sess := map[string]*sessions.Session{}
		for i, r := range []sessions.Run{
			{ID: "run_1", AgentID: "a1", DeployID: "d1", SessionID: "s1", Metadata: map[string]string{"userId": "u1", "screen": "home"}},
			{ID: "run_2", AgentID: "a1", DeployID: "d1", SessionID: "s2", Metadata: map[string]string{"userId": "u2", "screen": "home"}},
			{ID: "run_3", AgentID: "a1", DeployID: "d2", SessionID: "s1", Metadata: map[string]string{"userId": "u1", "screen": "cart"}},
			{ID: "run_4", AgentID: "a2", DeployID: "d9", SessionID: "s3", Metadata: map[string]string{"userId": "u1", "screen": "home"}},
		} {
			s := sess[r.SessionID]
			if s == nil {
				s = &sessions.Session{ID: r.SessionID, AgentID: r.AgentID, Status: sessions.StatusIdle, CreatedAt: at, UpdatedAt: at}
				sess[r.SessionID] = s
			}
			r.Kind, r.Reason, r.Provider, r.Model, r.Steps = sessions.RunChat, "model_stop", "openai", "gpt-4o-mini", 1
			r.Usage = sessions.Usage{InputTokens: 10 + i, OutputTokens: 5}
			r.UserID, r.AuthMethod = "verified-"+r.Metadata["userId"], "runtime_token"
			r.StartedAt = at.Add(time.Duration(i) * time.Minute)
			r.EndedAt = r.StartedAt.Add(1500 * time.Millisecond)
			// The turn's answer is saved with its run (on Postgres in one statement).
			from := len(s.Messages)
			s.Messages = append(s.Messages,
				sessions.Entry{Message: models.Message{Role: models.RoleUser, Content: "question?"}, At: r.StartedAt},
				sessions.Entry{Message: models.Message{Role: models.RoleAssistant, Content: "answer"}, At: r.EndedAt})
			if err := store.SaveRun(ctx, s, from, &r); err != nil {
				t.Fatal(err)
			}
			// A second save of the same run (a retried save) records it and the entries once.
			if err := store.SaveRun(ctx, s, from, &r); err != nil {
				t.Fatal(err)
			}
		}
		// A run without new entries (a model that was unavailable) is recorded too.
		noAnswer := sessions.Run{ID: "run_0", AgentID: "a1", SessionID: "s2", Reason: "error", StartedAt: at.Add(-time.Hour), EndedAt: at.Add(-time.Hour)}
		if err := store.SaveRun(ctx, sess["s2"], len(sess["s2"].Messages), &noAnswer); err != nil {
			t.Fatal(err)
		}
		if s1, err := store.Load(ctx, "s1"); err != nil || len(s1.Messages) != 4 || s1.Messages[3].Content != "answer" {
			t.Fatalf("s1 after its runs: %v, %+v", err, s1)
		}
		runs := registry.NewRuns(db)
		list := func(q registry.RunQuery) string {
			t.Helper()
			rs, err := runs.List(ctx, "a1", q)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range rs {
				ids = append(ids, r.ID)
			}
			return strings.Join(ids, " ")
		}
		for _, c := range []struct {
			q    registry.RunQuery
			want string
		}{
			{registry.RunQuery{}, "run_3 run_2 run_1 run_0"},
			{registry.RunQuery{UserKey: "u1"}, "run_3 run_1"},
			{registry.RunQuery{Screen: "home"}, "run_2 run_1"},
			{registry.RunQuery{UserKey: "u1", Screen: "home"}, "run_1"},
			{registry.RunQuery{SessionID: "s1"}, "run_3 run_1"},
			{registry.RunQuery{DeployID: "d1"}, "run_2 run_1"},
			{registry.RunQuery{DeployID: "d9"}, ""}, // another agent's deployment
			{registry.RunQuery{UserKey: "nobody"}, ""},
			{registry.RunQuery{Limit: 2}, "run_3 run_2"},
		} {
			if got := list(c.q); got != c.want {
				t.Errorf("%+v: %q, want %q", c.q, got, c.want)
			}
		}

		got, err := runs.Get(ctx, "a1", "run_2")
		if err != nil {
			t.Fatal(err)
		}
		want := registry.Run{ID: "run_2", AgentID: "a1", DeployID: "d1", SessionID: "s2", Kind: "chat", Reason: "model_stop",
			Provider: "openai", Model: "gpt-4o-mini", Steps: 1, Usage: registry.RunUsage{InputTokens: 11, OutputTokens: 5},
			UserID: "verified-u2", AuthMethod: "runtime_token", Metadata: map[string]string{"userId": "u2", "screen": "home"},
			StartedAt: at.Add(time.Minute), EndedAt: at.Add(time.Minute + 1500*time.Millisecond), DurationMs: 1500}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Get (-want +got):\n%s", diff)
		}
		if _, err := runs.Get(ctx, "a1", "run_4"); !errors.Is(err, registry.ErrRunNotFound) {
			t.Errorf("another agent's run: %v, want ErrRunNotFound", err)
		}
		if _, err := runs.Get(ctx, "a1", "run_nope"); !errors.Is(err, registry.ErrRunNotFound) {
			t.Errorf("an unknown run: %v, want ErrRunNotFound", err)
		}

		// Deleting a session deletes its runs, and only its runs.
		if err := store.Delete(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if got := list(registry.RunQuery{}); got != "run_2 run_0" {
			t.Errorf("after deleting s1: %q, want run_2 run_0", got)
		}
	})
}

// The runs list pages by (startedAt, id), newest first.
func TestRunPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		store, runs := dbstore.New(db), registry.NewRuns(db)
		testPages(t, registry.CursorRuns, func(base time.Time, it pageItem) {
			at := base.Add(it.at)
			s := &sessions.Session{ID: "s_" + it.id, AgentID: it.agent, Status: sessions.StatusIdle, CreatedAt: at, UpdatedAt: at}
			r := sessions.Run{ID: it.id, AgentID: it.agent, SessionID: s.ID, Kind: sessions.RunChat, Reason: "model_stop",
				Metadata: map[string]string{"userId": it.user}, StartedAt: at, EndedAt: at.Add(time.Second)}
			if err := store.SaveRun(ctx, s, 0, &r); err != nil {
				t.Fatal(err)
			}
		}, func(agent, user string, before registry.Cursor, limit int) ([]string, registry.Cursor, error) {
			rs, next, err := runs.Page(ctx, agent, registry.RunQuery{UserKey: user, Before: before, Limit: limit})
			var ids []string
			for _, r := range rs {
				ids = append(ids, r.ID)
			}
			return ids, next, err
		})
	})
}
