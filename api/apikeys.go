package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

type createAPIKeyRequest struct {
	Name string `json:"name" doc:"what the key is for"`
}

type createAPIKeyResponse struct {
	ID   string `json:"id"`
	Key  string `json:"key" doc:"the ak_ value, shown only in this response"`
	Name string `json:"name"`
}

// createAPIKey: POST /api/agents/{id}/api-keys.
func (a *API) createAPIKey(c *gin.Context) error {
	var req createAPIKeyRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if err := validateName("name", req.Name); err != nil {
		return err
	}
	k, value, err := a.deps.APIKeys.Create(c.Request.Context(), agentOf(c).ID, req.Name)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, createAPIKeyResponse{ID: k.ID, Key: value, Name: k.Name})
}
