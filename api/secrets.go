package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"svc/registry"
)

type putSecretRequest struct {
	Value *string `json:"value" doc:"the secret value; write-only"`
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
