package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
)

// A session owner's e-mail is in the agent's session and feedback lists (owner_email) only while
// the agent's access settings admit that user, by the allow rules or as a collaborator, as of the
// user's latest browser session on the agent; a user known only from a runtime token has none,
// and neither has anyone once the settings stop admitting them.
func TestOwnerEmail(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		h := newHarness(t, db)
		agent := h.createAgent("Owner e-mail")
		at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

		// alice signed in twice (her latest session has her new e-mail), carol is a collaborator,
		// bob is admitted by nothing, and rt is known only from a runtime token.
		browser := h.stores.BrowserSessions
		for i, bs := range []registry.BrowserSession{
			{IDHash: "h-alice-old", UserID: "alice", Email: "alice@old.example", EmailVerified: true, CreatedAt: at},
			{IDHash: "h-alice", UserID: "alice", Email: "alice@example.com", EmailVerified: true, Groups: []string{"staff"}, CreatedAt: at.Add(time.Hour)},
			{IDHash: "h-carol", UserID: "carol", Email: "carol@other.org", EmailVerified: true, CreatedAt: at},
			{IDHash: "h-bob", UserID: "bob", Email: "bob@example.net", EmailVerified: true, CreatedAt: at},
		} {
			bs.AgentID, bs.ExpiresAt = agent, at.Add(time.Duration(i+24)*time.Hour)
			if err := browser.Create(ctx, bs); err != nil {
				t.Fatal(err)
			}
		}
		store, feedback := dbstore.New(db), registry.NewFeedback(db)
		for i, owner := range []string{"alice", "carol", "bob", "rt", ""} {
			id := "o" + string(rune('1'+i))
			s := &sessions.Session{ID: "ses_" + id, AgentID: agent, Owner: owner, Status: sessions.StatusIdle,
				Metadata: map[string]string{}, CreatedAt: at, UpdatedAt: at.Add(time.Duration(i) * time.Second)}
			run := sessions.Run{ID: "run_" + id, AgentID: agent, SessionID: s.ID, Kind: sessions.RunChat, Reason: "model_stop",
				UserID: owner, Metadata: map[string]string{}, StartedAt: s.UpdatedAt, EndedAt: s.UpdatedAt}
			if err := store.SaveRun(ctx, s, 0, &run); err != nil {
				t.Fatal(err)
			}
			if _, err := feedback.Add(ctx, registry.Feedback{ID: "fb_" + id, AgentID: agent, SessionID: s.ID, Rating: "up",
				UserID: owner, Metadata: map[string]string{}, CreatedAt: s.UpdatedAt}); err != nil {
				t.Fatal(err)
			}
		}

		_, observer := h.mintToken(auth.Observer, "")
		// emails lists the owner_email of each user in both lists, which must agree; a user
		// without the field maps to "-".
		emails := func(t *testing.T) map[string]string {
			t.Helper()
			var ss struct {
				Sessions []map[string]any `json:"sessions"`
			}
			h.call(http.MethodGet, "/api/agents/"+agent+"/sessions", observer, nil, http.StatusOK, &ss)
			var fs struct {
				Feedback []map[string]any `json:"feedback"`
			}
			h.call(http.MethodGet, "/api/agents/"+agent+"/feedback", observer, nil, http.StatusOK, &fs)
			field := func(item map[string]any) string {
				if e, ok := item["owner_email"]; ok {
					return e.(string)
				}
				return "-"
			}
			got := map[string]string{}
			for _, s := range ss.Sessions {
				got[s["owner"].(string)] = field(s)
			}
			fromFeedback := map[string]string{}
			for _, f := range fs.Feedback {
				user, _ := f["userId"].(string)
				fromFeedback[user] = field(f)
			}
			if diff := cmp.Diff(got, fromFeedback); diff != "" {
				t.Errorf("owner_email of feedback differs from sessions (-sessions +feedback):\n%s", diff)
			}
			return got
		}
		none := map[string]string{"alice": "-", "carol": "-", "bob": "-", "rt": "-", "": "-"}
		if diff := cmp.Diff(none, emails(t)); diff != "" {
			t.Errorf("without access settings (-want +got):\n%s", diff)
		}

		put := func(doc string) {
			t.Helper()
			h.call(http.MethodPut, "/api/agents/"+agent+"/access", h.admin, doc, http.StatusOK, nil)
		}
		put(`{"oidc":{"issuer":"https://idp.example","clientId":"c"},"allow":{"emails":["ALICE@example.com"]},"collaborators":["carol@other.org"]}`)
		want := map[string]string{"alice": "alice@example.com", "carol": "carol@other.org", "bob": "-", "rt": "-", "": "-"}
		if diff := cmp.Diff(want, emails(t)); diff != "" {
			t.Errorf("alice allowed, carol a collaborator (-want +got):\n%s", diff)
		}
		// alice is admitted by her group now; she still shows.
		put(`{"oidc":{"issuer":"https://idp.example","clientId":"c"},"allow":{"groups":["staff"]}}`)
		want = map[string]string{"alice": "alice@example.com", "carol": "-", "bob": "-", "rt": "-", "": "-"}
		if diff := cmp.Diff(want, emails(t)); diff != "" {
			t.Errorf("alice in an allowed group (-want +got):\n%s", diff)
		}
		// Once the settings stop admitting her, her e-mail is gone; her old e-mail's domain does not count.
		put(`{"oidc":{"issuer":"https://idp.example","clientId":"c"},"allow":{"domains":["old.example","example.net"]}}`)
		want = map[string]string{"alice": "-", "carol": "-", "bob": "bob@example.net", "rt": "-", "": "-"}
		if diff := cmp.Diff(want, emails(t)); diff != "" {
			t.Errorf("alice no longer admitted (-want +got):\n%s", diff)
		}
	})
}
