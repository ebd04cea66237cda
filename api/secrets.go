package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"svc/errcode"
	"svc/registry"
)

// An agent's secrets: values the env: references of its source resolve to (before the
// environment of the process that resolves them). A value is write-only: it can be set and
// removed, and its name listed, but it is never answered.

type putSecretRequest struct {
	Value *string `json:"value" doc:"the secret value; write-only"`
}

type secretResponse struct {
	Name      string    `json:"name"`
	UpdatedAt time.Time `json:"updatedAt" doc:"when the value was last set"`
}

type secretListResponse struct {
	Secrets []secretResponse `json:"secrets" doc:"by name; never the values"`
}

// putSecret: PUT /api/agents/{id}/secrets/{NAME}.
func (a *API) putSecret(c *gin.Context) error {
	name := c.Param("name")
	if err := registry.ValidateSecretName(name); err != nil {
		return err
	}
	var req putSecretRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Value == nil {
		return InvalidField("value", "is required")
	}
	if err := a.secrets.Put(c.Request.Context(), agentOf(c).ID, name, *req.Value); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// listSecrets: GET /api/agents/{id}/secrets.
func (a *API) listSecrets(c *gin.Context) error {
	list, err := a.secrets.List(c.Request.Context(), agentOf(c).ID)
	if err != nil {
		return err
	}
	out := secretListResponse{Secrets: make([]secretResponse, len(list))}
	for i, s := range list {
		out.Secrets[i] = secretResponse{Name: s.Name, UpdatedAt: s.UpdatedAt}
	}
	return writeJSON(c, http.StatusOK, out)
}

// deleteSecret: DELETE /api/agents/{id}/secrets/{NAME}.
func (a *API) deleteSecret(c *gin.Context) error {
	name := c.Param("name")
	if err := registry.ValidateSecretName(name); err != nil {
		return err
	}
	ag := agentOf(c)
	deleted, err := a.secrets.Delete(c.Request.Context(), ag.ID, name)
	if err != nil {
		return err
	}
	if !deleted {
		return Errorf(errcode.NotFound, "agent %s has no secret %s", ag.Slug, name)
	}
	c.Status(http.StatusNoContent)
	return nil
}
