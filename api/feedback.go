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

// listFeedback serves GET /api/agents/{id}/feedback: the ratings users gave the agent's turns
// (POST /feedback on its runtime), filtered by the metadata keys userId and screen.
func (a *API) listFeedback(c *gin.Context) error {
	ag, _ := AgentFrom(c)
	q := registry.FeedbackQuery{UserKey: c.Query("userId"), Screen: c.Query("screen")}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return InvalidField("limit", "must be a whole number from 1 to 500, got %q", v)
		}
		q.Limit = n
	}
	fs, err := a.deps.Stores.Feedback.List(c.Request.Context(), ag.ID, q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, feedbackListResponse{Feedback: fs})
}
