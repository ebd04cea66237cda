package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"svc/registry"
)

// The query parameters of the agent's lists (sessions, feedback, runs). Each route declares its
// set in Route.Query, which refuses any other parameter.
var (
	userIDParam = QueryParam{Name: "userId", Doc: "only items whose metadata key userId has this value"}
	screenParam = QueryParam{Name: "screen", Doc: "only items whose metadata key screen has this value"}
	limitParam  = QueryParam{Name: "limit", Type: "integer", Doc: "items per page, 1..500 (default 100)"}
	beforeParam = QueryParam{Name: "before", Doc: "the `next` of the previous page: the items after it, newest first; " +
		"give the same filters (a cursor of another list or agent is refused)"}

	sessionListParams  = []QueryParam{userIDParam, screenParam, limitParam, beforeParam}
	feedbackListParams = []QueryParam{userIDParam, screenParam, limitParam, beforeParam}
	runListParams      = []QueryParam{userIDParam, screenParam,
		{Name: "session", Doc: "only the runs of this session"},
		{Name: "deployment", Doc: "only the runs of this deployment"},
		limitParam, beforeParam}
)

// sessionListResponse is GET /api/agents/{id}/sessions.
type sessionListResponse struct {
	Sessions []registry.SessionSummary `json:"sessions"`
	Next     string                    `json:"next,omitempty" doc:"the cursor of the next page, for ?before=; present only when more items may follow"`
}

// feedbackListResponse is GET /api/agents/{id}/feedback.
type feedbackListResponse struct {
	Feedback []registry.Feedback `json:"feedback"`
	Next     string              `json:"next,omitempty" doc:"the cursor of the next page, for ?before=; present only when more items may follow"`
}

// runListResponse is GET /api/agents/{id}/runs.
type runListResponse struct {
	Runs []registry.Run `json:"runs"`
	Next string         `json:"next,omitempty" doc:"the cursor of the next page, for ?before=; present only when more items may follow"`
}

// listSessions serves GET /api/agents/{id}/sessions: the agent's chat sessions across its
// deployments, a page at a time, filtered by the metadata keys userId and screen.
func (a *API) listSessions(c *gin.Context) error {
	ag, _ := AgentFrom(c)
	limit, before, err := listPage(c)
	if err != nil {
		return err
	}
	q := registry.SessionQuery{Limit: limit, Before: before, Metadata: metadataFilter(c)}
	ss, next, err := a.deps.Stores.Sessions.Page(c.Request.Context(), ag.ID, q)
	if err != nil {
		return pageError(err)
	}
	owners := make([]string, 0, len(ss))
	for _, s := range ss {
		owners = append(owners, s.Owner)
	}
	emails, err := a.ownerEmails(c.Request.Context(), ag.ID, owners)
	if err != nil {
		return err
	}
	for i := range ss {
		ss[i].OwnerEmail = emails[ss[i].Owner]
	}
	return writeJSON(c, http.StatusOK, sessionListResponse{Sessions: ss, Next: next.String()})
}

// listFeedback serves GET /api/agents/{id}/feedback: the ratings users gave the agent's turns
// (POST /feedback on its runtime), a page at a time, filtered by the metadata keys userId and
// screen.
func (a *API) listFeedback(c *gin.Context) error {
	ag, _ := AgentFrom(c)
	limit, before, err := listPage(c)
	if err != nil {
		return err
	}
	q := registry.FeedbackQuery{UserKey: c.Query("userId"), Screen: c.Query("screen"), Limit: limit, Before: before}
	fs, next, err := a.deps.Stores.Feedback.Page(c.Request.Context(), ag.ID, q)
	if err != nil {
		return pageError(err)
	}
	users := make([]string, 0, len(fs))
	for _, f := range fs {
		users = append(users, f.UserID)
	}
	emails, err := a.ownerEmails(c.Request.Context(), ag.ID, users)
	if err != nil {
		return err
	}
	for i := range fs {
		fs[i].OwnerEmail = emails[fs[i].UserID]
	}
	return writeJSON(c, http.StatusOK, feedbackListResponse{Feedback: fs, Next: next.String()})
}

// listRuns serves GET /api/agents/{id}/runs: the agent's chat turns as its runtimes recorded
// them, a page at a time, filtered by the metadata keys userId and screen, by session and by
// deployment.
func (a *API) listRuns(c *gin.Context) error {
	ag, _ := AgentFrom(c)
	limit, before, err := listPage(c)
	if err != nil {
		return err
	}
	q := registry.RunQuery{UserKey: c.Query("userId"), Screen: c.Query("screen"), SessionID: c.Query("session"),
		DeployID: c.Query("deployment"), Limit: limit, Before: before}
	rs, next, err := a.deps.Stores.Runs.Page(c.Request.Context(), ag.ID, q)
	if err != nil {
		return pageError(err)
	}
	return writeJSON(c, http.StatusOK, runListResponse{Runs: rs, Next: next.String()})
}

// getRun serves GET /api/agents/{id}/runs/{runId}.
func (a *API) getRun(c *gin.Context) error {
	ag, _ := AgentFrom(c)
	r, err := a.deps.Stores.Runs.Get(c.Request.Context(), ag.ID, c.Param("runId"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, r)
}

// metadataFilter is the ?userId= and ?screen= of a list: the metadata keys of spec 2.6.
func metadataFilter(c *gin.Context) map[string]string {
	m := map[string]string{}
	for _, k := range []string{"userId", "screen"} {
		if v := c.Query(k); v != "" {
			m[k] = v
		}
	}
	return m
}

// listPage is the ?limit= (1..500, 0 when absent) and the ?before= (the zero Cursor when
// absent) of a list.
func listPage(c *gin.Context) (int, registry.Cursor, error) {
	limit := 0
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return 0, registry.Cursor{}, InvalidField("limit", "must be a whole number from 1 to 500, got %q", v)
		}
		limit = n
	}
	var before registry.Cursor
	if v := c.Query("before"); v != "" {
		var err error
		if before, err = registry.ParseCursor(v); err != nil {
			return 0, registry.Cursor{}, pageError(err)
		}
	}
	return limit, before, nil
}

// pageError names ?before= in a list's error about its cursor.
func pageError(err error) error {
	if errors.Is(err, registry.ErrBadCursor) {
		return InvalidField("before", "is not a cursor of this list; give the next of one of its pages")
	}
	return err
}
