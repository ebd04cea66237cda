package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"svc/auth"
	"svc/errcode"
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

type apiKeyResponse struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt" doc:"when a runtime last accepted the key (up to a minute late); null when never"`
}

type apiKeyListResponse struct {
	APIKeys []apiKeyResponse `json:"apiKeys" doc:"the agent's keys that are not revoked, oldest first; never their values"`
}

// listAPIKeys: GET /api/agents/{id}/api-keys.
func (a *API) listAPIKeys(c *gin.Context) error {
	keys, err := a.deps.APIKeys.List(c.Request.Context(), agentOf(c).ID)
	if err != nil {
		return err
	}
	out := apiKeyListResponse{APIKeys: make([]apiKeyResponse, 0, len(keys))}
	for _, k := range keys {
		out.APIKeys = append(out.APIKeys, apiKeyResponse{ID: k.ID, Name: k.Name, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt})
	}
	return writeJSON(c, http.StatusOK, out)
}

// revokeAPIKey: DELETE /api/agents/{id}/api-keys/{keyId}. Every runner refuses the key within
// a few seconds (auth.Keys polls the revocations); a key that is not the agent's, or is revoked
// already, is NOT_FOUND.
func (a *API) revokeAPIKey(c *gin.Context) error {
	err := a.deps.APIKeys.Revoke(c.Request.Context(), agentOf(c).ID, c.Param("keyId"))
	if errors.Is(err, auth.ErrNotFound) {
		return Errorf(errcode.NotFound, "the agent has no API key %q (or it is revoked already)", c.Param("keyId"))
	}
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
