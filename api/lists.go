package api

import (
	"net/http"
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
