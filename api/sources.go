package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"svc/registry"
)

type putSourceRequest struct {
	Type          registry.SourceType `json:"type" enum:"git,hosted"`
	URL           string              `json:"url,omitempty" doc:"git: clone URL (https, ssh, git, file or user@host:path)"`
	DefaultBranch string              `json:"defaultBranch,omitempty" doc:"git: default branch, main when absent"`
	WebhookSecret string              `json:"webhookSecret,omitempty" doc:"git: secret that signs webhooks; write-only"`
	Credentials   string              `json:"credentials,omitempty" doc:"git: env:VAR naming the clone credentials"`
}

type sourceResponse struct {
	Type             registry.SourceType `json:"type" enum:"git,hosted"`
	URL              string              `json:"url,omitempty"`
	DefaultBranch    string              `json:"defaultBranch,omitempty"`
	Credentials      string              `json:"credentials,omitempty"`
	HasWebhookSecret bool                `json:"hasWebhookSecret" doc:"whether webhooks must be signed; the secret is never shown"`
	UpdatedAt        time.Time           `json:"updatedAt"`
}

func toSourceResponse(s registry.Source) sourceResponse {
	return sourceResponse{
		Type: s.Type, URL: s.URL, DefaultBranch: s.DefaultBranch, Credentials: s.Credentials,
		HasWebhookSecret: s.WebhookSecret != "", UpdatedAt: s.UpdatedAt,
	}
}

// putSource: PUT /api/agents/{id}/source.
func (a *API) putSource(c *gin.Context) error {
	var req putSourceRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	src, err := a.sources.Put(c.Request.Context(), agentOf(c).ID, registry.SourceSpec{
		Type: req.Type, URL: req.URL, DefaultBranch: req.DefaultBranch, WebhookSecret: req.WebhookSecret, Credentials: req.Credentials,
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toSourceResponse(src))
}
