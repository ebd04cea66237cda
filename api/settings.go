package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"svc/registry"
)

type settingsResponse struct {
	ProductionBranch      string `json:"productionBranch"`
	AutoDeploy            bool   `json:"autoDeploy"`
	AutoPromoteProduction bool   `json:"autoPromoteProduction"`
}

type putSettingsRequest struct {
	ProductionBranch      *string `json:"productionBranch,omitempty" doc:"empty string returns to the default (the source's default branch)"`
	AutoDeploy            *bool   `json:"autoDeploy,omitempty"`
	AutoPromoteProduction *bool   `json:"autoPromoteProduction,omitempty"`
}

func toSettingsResponse(s registry.DeploySettings) settingsResponse {
	return settingsResponse{ProductionBranch: s.ProductionBranch, AutoDeploy: s.AutoDeploy, AutoPromoteProduction: s.AutoPromoteProduction}
}

// getSettings: GET /api/agents/{id}/deploy-settings.
func (a *API) getSettings(c *gin.Context) error {
	st, err := a.settings.Get(c.Request.Context(), agentOf(c).ID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toSettingsResponse(st))
}

// putSettings: PUT /api/agents/{id}/deploy-settings; any subset of the fields.
func (a *API) putSettings(c *gin.Context) error {
	var req putSettingsRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	st, err := a.settings.Put(c.Request.Context(), agentOf(c).ID, registry.SettingsPatch{
		ProductionBranch: req.ProductionBranch, AutoDeploy: req.AutoDeploy, AutoPromoteProduction: req.AutoPromoteProduction,
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toSettingsResponse(st))
}
