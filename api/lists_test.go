package api_test

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
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

// listPage is one page of an agent's list: the ids of its items, and its next cursor (nil when
// the response has none).
type listPage struct {
	ids  []string
	next *string
}

// The agent's sessions, feedback and runs come a page at a time: ?limit= items, newest first by
// (time, id), and next when more may follow, which ?before= continues from with the same filters.
// A before that is not a cursor of the same list of the same agent is a 400 naming before, and
// each list refuses a parameter it does not know, repeated or over-long, naming it.
func TestListPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		h := newHarness(t, db)
		agentA, agentB := h.createAgent("Pages A"), h.createAgent("Pages B")
		at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
		// Five items of agent A for user u1, three of them at one time; one for u2; one of agent B.
		type item struct {
			id, agent, user string
			at              time.Duration
		}
		items := []item{
			{"i1", agentA, "u1", 0}, {"i2", agentA, "u1", time.Second}, {"i4", agentA, "u1", time.Second},
			{"i3", agentA, "u1", time.Second}, {"i5", agentA, "u1", 2 * time.Second}, {"i6", agentA, "u2", time.Second},
			{"i7", agentB, "u1", time.Second},
		}
		store, feedback := dbstore.New(db), registry.NewFeedback(db)
		for _, it := range items {
			meta := map[string]string{"userId": it.user}
			// The run is saved with its session, as a runtime saves a turn.
			s := &sessions.Session{ID: "ses_" + it.id, AgentID: it.agent, Status: sessions.StatusIdle, Metadata: meta, CreatedAt: at, UpdatedAt: at.Add(it.at)}
			run := sessions.Run{ID: "run_" + it.id, AgentID: it.agent, SessionID: s.ID, Kind: sessions.RunChat, Reason: "model_stop",
				Metadata: meta, StartedAt: at.Add(it.at), EndedAt: at.Add(it.at + time.Second)}
			if err := store.SaveRun(ctx, s, 0, &run); err != nil {
				t.Fatal(err)
			}
			if _, err := feedback.Add(ctx, registry.Feedback{ID: "fb_" + it.id, AgentID: it.agent, Rating: "up", Metadata: meta, CreatedAt: at.Add(it.at)}); err != nil {
				t.Fatal(err)
			}
		}
		_, observer := h.mintToken(auth.Observer, "")
		get := func(t *testing.T, path string) listPage {
			t.Helper()
			var out map[string]json.RawMessage
			h.call(http.MethodGet, path, observer, nil, http.StatusOK, &out)
			var page listPage
			for key, raw := range out {
				if key == "next" {
					page.next = new(string)
					decodeRaw(t, raw, page.next)
					continue
				}
				var list []struct {
					ID  string `json:"id"`        // feedback
					SID string `json:"sessionId"` // sessions (and feedback and runs)
					RID string `json:"runId"`     // runs
				}
				decodeRaw(t, raw, &list)
				for _, it := range list { // ses_i1, fb_i1 and run_i1 are all i1
					_, id, _ := strings.Cut(cmp.Or(it.RID, it.ID, it.SID), "_")
					page.ids = append(page.ids, id)
				}
			}
			return page
		}
		for _, list := range []struct{ name, cursor string }{
			{"sessions", registry.CursorSessions}, {"feedback", registry.CursorFeedback}, {"runs", registry.CursorRuns},
		} {
			t.Run(list.name, func(t *testing.T) {
				base := "/api/agents/" + agentA + "/" + list.name
				// Pages of 2 of u1's items: 2, 2, 1, the tie at one second split across pages.
				var got [][]string
				query := "?userId=u1&limit=2"
				for range 5 {
					page := get(t, base+query)
					got = append(got, page.ids)
					if page.next == nil {
						break
					}
					query = "?userId=u1&limit=2&before=" + url.QueryEscape(*page.next)
				}
				want := [][]string{{"i5", "i4"}, {"i3", "i2"}, {"i1"}}
				if !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("pages of 2 = %v, want %v", got, want)
				}
				// A page that holds everything has no next; without the filter, u2's item is in.
				if page := get(t, base); page.next != nil || strings.Join(page.ids, " ") != "i5 i6 i4 i3 i2 i1" {
					t.Errorf("first page = %v next %v, want i5 i6 i4 i3 i2 i1 and no next", page.ids, page.next)
				}

				cursorOf := func(l, agent string) string {
					return url.QueryEscape(registry.Cursor{List: l, AgentID: agent, At: at.Add(time.Second), ID: "x"}.String())
				}
				other := registry.CursorRuns
				if list.cursor == registry.CursorRuns {
					other = registry.CursorFeedback
				}
				for query, field := range map[string]string{
					"?before=garbage": "before",
					"?before=run_i3":  "before", // an item's id is no cursor
					"?before=" + cursorOf(list.cursor, agentB): "before", // another agent's cursor
					"?before=" + cursorOf(other, agentA):       "before", // another list's cursor
					"?before=a&before=b":                       "before",
					"?limit=0":                                 "limit",
					"?limit=501":                               "limit",
					"?userid=u1":                               "userid", // misspelt: refused, not ignored
					"?cursor=x":                                "cursor",
					"?screen=a&screen=b":                       "screen",
					"?userId=" + strings.Repeat("u", 1025):     "userId",
				} {
					wantInvalidField(t, h, base+query, observer, field)
				}
				// The cursor refused on agent A's list pages agent B's: its one item, at the cursor's
				// time with a smaller id.
				if page := get(t, "/api/agents/"+agentB+"/"+list.name+"?before="+cursorOf(list.cursor, agentB)); !slices.Equal(page.ids, []string{"i7"}) {
					t.Errorf("agent B's list after its own cursor = %v, want [i7]", page.ids)
				}
			})
		}
	})
}

func decodeRaw(t *testing.T, raw json.RawMessage, out any) {
	t.Helper()
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

// wantInvalidField checks that GET path answers 400 INVALID_REQUEST naming field, in the
// error's field and at the start of its message.
func wantInvalidField(t *testing.T, h *harness, path, token, field string) {
	t.Helper()
	rec := h.do(request{method: http.MethodGet, path: path, token: token})
	var env errorEnvelope
	decode(t, rec, &env)
	if rec.Code != http.StatusBadRequest || env.Error.Code != "INVALID_REQUEST" || env.Error.Field != field ||
		!strings.HasPrefix(env.Error.Message, field+": ") {
		t.Errorf("GET %.80s = %d %s, want 400 INVALID_REQUEST naming %s", path, rec.Code, rec.Body, field)
	}
}
