package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"svc/registry"
)

type commitStatusRequest struct {
	Commit      string               `json:"commit" doc:"full commit SHA (40 or 64 hex digits)"`
	Context     string               `json:"context,omitempty" doc:"svc/evals when absent"`
	State       registry.CommitState `json:"state" enum:"pending,success,failure,error"`
	Description string               `json:"description,omitempty"`
}

type commitStatusResponse struct {
	Commit      string               `json:"commit"`
	Context     string               `json:"context"`
	State       registry.CommitState `json:"state" enum:"pending,success,failure,error"`
	Description string               `json:"description"`
	CreatedAt   time.Time            `json:"createdAt"`
}

// commitStatusListResponse is GET /api/agents/{id}/commit-statuses.
type commitStatusListResponse struct {
	Statuses []listedCommitStatus `json:"statuses"`
}

type listedCommitStatus struct {
	commitStatusResponse
	// Latest marks the newest status of its context: the one that counts.
	Latest bool `json:"latest"`
}

// listCommitStatuses: GET /api/agents/{id}/commit-statuses?commit=SHA.
func (a *API) listCommitStatuses(c *gin.Context) error {
	commit := strings.ToLower(c.Query("commit"))
	if err := registry.ValidateCommit("commit", commit); err != nil {
		return err
	}
	list, err := a.commitStatuses.List(c.Request.Context(), agentOf(c).ID, commit)
	if err != nil {
		return err
	}
	out := commitStatusListResponse{Statuses: make([]listedCommitStatus, 0, len(list))}
	seen := map[string]bool{}
	for _, st := range list {
		out.Statuses = append(out.Statuses, listedCommitStatus{
			commitStatusResponse: commitStatusResponse{Commit: st.Commit, Context: st.Context, State: st.State, Description: st.Description, CreatedAt: st.CreatedAt},
			Latest:               !seen[st.Context],
		})
		seen[st.Context] = true
	}
	return writeJSON(c, http.StatusOK, out)
}

// addCommitStatus: POST /api/agents/{id}/commit-statuses.
func (a *API) addCommitStatus(c *gin.Context) error {
	var req commitStatusRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Context == "" {
		req.Context = registry.EvalsContext
	}
	st, err := a.commitStatuses.Add(c.Request.Context(), registry.CommitStatus{
		AgentID: agentOf(c).ID, Commit: req.Commit, Context: req.Context, State: req.State, Description: req.Description,
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, commitStatusResponse{
		Commit: st.Commit, Context: st.Context, State: st.State, Description: st.Description, CreatedAt: st.CreatedAt,
	})
}
