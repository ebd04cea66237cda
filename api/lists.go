package api

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"svc/registry"
)

// feedbackListResponse is GET /api/agents/{id}/feedback.
type feedbackListResponse struct {
	Feedback []registry.Feedback `json:"feedback"`
}

// sessionListResponse is GET /api/agents/{id}/sessions.
type sessionListResponse struct {
	Sessions []registry.SessionSummary `json:"sessions"`
}

// listSessions serves GET /api/agents/{id}/sessions: the agent's chat sessions across its
// deployments, filtered by the metadata keys userId and screen.
func (a *API) listSessions(c *gin.Context) error {
	ag, _ := AgentFrom(c)
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	q := registry.SessionQuery{Limit: limit, Metadata: metadataFilter(c)}
	ss, err := a.deps.Stores.Sessions.List(c.Request.Context(), ag.ID, q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, sessionListResponse{Sessions: ss})
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

// listLimit is the ?limit= of a list: 1..500, 0 when absent.
func listLimit(c *gin.Context) (int, error) {
	v := c.Query("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 500 {
		return 0, InvalidField("limit", "must be a whole number from 1 to 500, got %q", v)
	}
	return n, nil
}

// listFeedback serves GET /api/agents/{id}/feedback: the ratings users gave the agent's turns
// (POST /feedback on its runtime), filtered by the metadata keys userId and screen.
func (a *API) listFeedback(c *gin.Context) error {
	ag, _ := AgentFrom(c)
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	q := registry.FeedbackQuery{UserKey: c.Query("userId"), Screen: c.Query("screen"), Limit: limit}
	fs, err := a.deps.Stores.Feedback.List(c.Request.Context(), ag.ID, q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, feedbackListResponse{Feedback: fs})
}

// runListResponse is GET /api/agents/{id}/runs.
type runListResponse struct {
	Runs []registry.Run `json:"runs"`
}

// runFilters are the query parameters of GET /api/agents/{id}/runs besides limit: each names
// the run field it matches.
var runFilters = []string{"userId", "screen", "session", "deployment"}

// maxFilterLen bounds a filter's value: a metadata value is at most 1,024 characters.
const maxFilterLen = 1024

// listRuns serves GET /api/agents/{id}/runs: the agent's chat turns as its runtimes recorded
// them, newest first, filtered by the metadata keys userId and screen, by session and by
// deployment. A parameter it does not know is refused, so that a misspelt filter never
// silently lists every run.
func (a *API) listRuns(c *gin.Context) error {
	ag, _ := AgentFrom(c)
	for k, vs := range c.Request.URL.Query() {
		if k != "limit" && !slices.Contains(runFilters, k) {
			return InvalidField(k, "is not a filter of runs; use userId, screen, session, deployment or limit")
		}
		if len(vs) > 1 {
			return InvalidField(k, "is given %d times; give it once", len(vs))
		}
		if len(vs[0]) > maxFilterLen {
			return InvalidField(k, "is %d characters long; at most %d", len(vs[0]), maxFilterLen)
		}
	}
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	q := registry.RunQuery{UserKey: c.Query("userId"), Screen: c.Query("screen"), SessionID: c.Query("session"),
		DeployID: c.Query("deployment"), Limit: limit}
	rs, err := a.deps.Stores.Runs.List(c.Request.Context(), ag.ID, q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, runListResponse{Runs: rs})
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
