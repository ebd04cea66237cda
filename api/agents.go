package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"svc/errcode"
	"svc/registry"
)

type createAgentRequest struct {
	Name string `json:"name"`
	Slug string `json:"slug,omitempty" doc:"DNS label of at most 40 characters [a-z0-9-]; derived from name when absent"`
}

type agentResponse struct {
	AgentID   string           `json:"agentId"`
	Slug      string           `json:"slug"`
	Name      string           `json:"name"`
	URL       string           `json:"url" doc:"persistent URL of the active production deployment"`
	CreatedAt time.Time        `json:"createdAt"`
	Source    *sourceResponse  `json:"source" doc:"null until a source is connected"`
	Settings  settingsResponse `json:"settings"`
}

type agentListResponse struct {
	Agents []agentResponse `json:"agents"`
}

// createAgent: POST /api/agents.
func (a *API) createAgent(c *gin.Context) error {
	var req createAgentRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if p := principalOf(c); p.AgentID != "" {
		return Errorf(errcode.Forbidden, "a token bound to an agent cannot create agents")
	}
	ag, err := a.agents.Create(c.Request.Context(), req.Name, req.Slug)
	if err != nil {
		return err
	}
	resp, err := a.agentResponses(c.Request.Context(), ag)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, resp[0])
}

// listAgents: GET /api/agents. A bound token sees only its own agent.
func (a *API) listAgents(c *gin.Context) error {
	var agents []registry.Agent
	if p := principalOf(c); p.AgentID != "" {
		ag, err := a.agents.Get(c.Request.Context(), p.AgentID)
		if err != nil && !errors.Is(err, registry.ErrAgentNotFound) {
			return err
		}
		if err == nil {
			agents = append(agents, ag)
		}
	} else {
		var err error
		if agents, err = a.agents.List(c.Request.Context()); err != nil {
			return err
		}
	}
	resp, err := a.agentResponses(c.Request.Context(), agents...)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, agentListResponse{Agents: resp})
}

// getAgent: GET /api/agents/{id}.
func (a *API) getAgent(c *gin.Context) error {
	resp, err := a.agentResponses(c.Request.Context(), agentOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resp[0])
}

// agentResponses assembles agents with their sources and settings: the same few queries for
// one agent or a list of them (not one per agent).
func (a *API) agentResponses(ctx context.Context, agents ...registry.Agent) ([]agentResponse, error) {
	ids := make([]string, len(agents))
	for i, ag := range agents {
		ids[i] = ag.ID
	}
	srcs, err := a.sources.GetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	sts, err := a.settings.GetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]agentResponse, len(agents))
	for i, ag := range agents {
		out[i] = agentResponse{AgentID: ag.ID, Slug: ag.Slug, Name: ag.Name, URL: a.agentURL(ag.Slug), CreatedAt: ag.CreatedAt,
			Settings: toSettingsResponse(sts[ag.ID])}
		if src, ok := srcs[ag.ID]; ok {
			s := toSourceResponse(src)
			out[i].Source = &s
		}
	}
	return out, nil
}

// actor names the caller in records (the token id, never its value).
func actor(c *gin.Context) string { return principalOf(c).TokenID }
