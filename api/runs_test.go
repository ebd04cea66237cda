package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
)

// recordRun stores run on its session as a runtime does at a turn's end.
func recordRun(t *testing.T, db *gorm.DB, run sessions.Run) {
	t.Helper()
	s := &sessions.Session{ID: run.SessionID, AgentID: run.AgentID, Status: sessions.StatusIdle, CreatedAt: run.StartedAt, UpdatedAt: run.EndedAt}
	if err := dbstore.New(db).SaveRun(context.Background(), s, 0, &run); err != nil {
		t.Fatal(err)
	}
}

// GET /api/agents/{id}/runs lists an agent's runs newest first, filtered by the metadata keys
// userId and screen, by session and by deployment; a bad filter or limit is a 400 naming the
// parameter. GET /api/agents/{id}/runs/{runId} answers one run of the agent, 404 otherwise.
func TestRunList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		agentA, agentB := h.createAgent("Runs A"), h.createAgent("Runs B")
		at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
		for i, r := range []sessions.Run{
			{ID: "run_a1", AgentID: agentA, DeployID: "d1", SessionID: "ses_1", Metadata: map[string]string{"userId": "u1", "screen": "home"}},
			{ID: "run_a2", AgentID: agentA, DeployID: "d1", SessionID: "ses_2", Metadata: map[string]string{"userId": "u2", "screen": "home"}},
			{ID: "run_a3", AgentID: agentA, DeployID: "d2", SessionID: "ses_1", Metadata: map[string]string{"userId": "u1", "screen": "cart"}},
			{ID: "run_b1", AgentID: agentB, DeployID: "d9", SessionID: "ses_9", Metadata: map[string]string{"userId": "u1", "screen": "home"}},
		} {
			r.Kind, r.Reason, r.Provider, r.Model = sessions.RunChat, "model_stop", "echo", "echo"
			r.StartedAt = at.Add(time.Duration(i) * time.Minute)
			r.EndedAt = r.StartedAt.Add(time.Second)
			recordRun(t, db, r)
		}
		_, observer := h.mintToken(auth.Observer, agentA)
		base := "/api/agents/" + agentA + "/runs"
		list := func(query string) string {
			t.Helper()
			var out struct{ Runs []registry.Run }
			h.call(http.MethodGet, base+query, observer, nil, http.StatusOK, &out)
			var ids []string
			for _, r := range out.Runs {
				ids = append(ids, r.ID)
			}
			return strings.Join(ids, " ")
		}
		for query, want := range map[string]string{
			"":                           "run_a3 run_a2 run_a1",
			"?userId=u1":                 "run_a3 run_a1",
			"?screen=home":               "run_a2 run_a1",
			"?userId=u1&screen=home":     "run_a1",
			"?session=ses_1":             "run_a3 run_a1",
			"?deployment=d1":             "run_a2 run_a1",
			"?deployment=d9":             "", // another agent's
			"?limit=1":                   "run_a3",
			"?userId=u1&limit=1":         "run_a3",
			"?userId=nobody":             "",
			"?userId=u1&session=ses_2":   "",
			"?screen=cart&deployment=d2": "run_a3",
		} {
			if got := list(query); got != want {
				t.Errorf("runs%s = %q, want %q", query, got, want)
			}
		}

		for query, field := range map[string]string{
			"?limit=0":                              "limit",
			"?limit=501":                            "limit",
			"?limit=ten":                            "limit",
			"?userid=u1":                            "userid", // misspelt: refused, not ignored
			"?user=u1":                              "user",
			"?screen=a&screen=b":                    "screen",
			"?session=" + strings.Repeat("s", 1025): "session",
		} {
			wantInvalidField(t, h, base+query, observer, field)
		}

		var one registry.Run
		h.call(http.MethodGet, base+"/run_a2", observer, nil, http.StatusOK, &one)
		if one.ID != "run_a2" || one.SessionID != "ses_2" || one.Metadata["userId"] != "u2" || one.DurationMs != 1000 || one.Reason != "model_stop" {
			t.Errorf("run_a2 = %+v", one)
		}
		for _, id := range []string{"run_b1", "run_nope"} { // another agent's run is not found either
			rec := h.do(request{method: http.MethodGet, path: base + "/" + id, token: observer})
			var env errorEnvelope
			decode(t, rec, &env)
			if rec.Code != http.StatusNotFound || env.Error.Code != "NOT_FOUND" {
				t.Errorf("%s = %d %s, want 404", id, rec.Code, rec.Body)
			}
		}
	})
}
