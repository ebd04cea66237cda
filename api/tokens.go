package api

import (
	"errors"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"svc/auth"
	"svc/errcode"
	"svc/registry"
)

// Limits of names and claims given to the token routes.
const (
	maxNameLen  = 100 // characters of a token or API key name
	maxClaimLen = 256 // bytes of a runtime token's scope_id or user_id
)

type createTokenRequest struct {
	Name    string    `json:"name" doc:"what the token is for"`
	Kind    auth.Kind `json:"kind" enum:"observer,operator,admin"`
	AgentID string    `json:"agentId,omitempty" doc:"bind the token to this agent (its id or slug)"`
}

type createTokenResponse struct {
	ID      string    `json:"id"`
	Token   string    `json:"token" doc:"the pk_ value, shown only in this response"`
	Name    string    `json:"name"`
	Kind    auth.Kind `json:"kind" enum:"observer,operator,admin"`
	AgentID *string   `json:"agentId" doc:"the bound agent, null when unbound"`
}

// tokenSelfResponse is the calling token as GET /api/tokens/self shows it (never its value).
type tokenSelfResponse struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Kind    auth.Kind `json:"kind" enum:"observer,operator,admin"`
	AgentID *string   `json:"agentId" doc:"the bound agent, null when unbound"`
}

// tokenSelf: GET /api/tokens/self, who the caller is: a client (the console) reads the kind and
// binding to disable what the token may not do. Any valid pk_ token may ask.
func (a *API) tokenSelf(c *gin.Context) error {
	p := principalOf(c)
	resp := tokenSelfResponse{ID: p.TokenID, Name: p.Name, Kind: p.Kind}
	if p.AgentID != "" {
		resp.AgentID = &p.AgentID
	}
	return writeJSON(c, http.StatusOK, resp)
}

// createToken: POST /api/tokens. A bound admin may mint only tokens bound to its own agent.
func (a *API) createToken(c *gin.Context) error {
	var req createTokenRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if err := validateName("name", req.Name); err != nil {
		return err
	}
	switch {
	case req.Kind == "":
		return InvalidField("kind", "is required (observer, operator or admin)")
	case !req.Kind.Valid():
		return InvalidField("kind", "must be observer, operator or admin")
	}
	// agentId is the agent's id or slug; the token is bound to its id.
	var bindTo registry.Agent
	if req.AgentID != "" {
		ag, err := a.agents.Resolve(c.Request.Context(), req.AgentID)
		switch {
		case errors.Is(err, registry.ErrAgentNotFound):
			if p := principalOf(c); p.AgentID != "" {
				break // the check below: a bound token learns nothing about other agents
			}
			return InvalidField("agentId", "no agent has this id or slug")
		case err != nil:
			return err
		}
		bindTo = ag
	}
	if p := principalOf(c); p.AgentID != "" && bindTo.ID != p.AgentID {
		return Errorf(errcode.Forbidden, "a token bound to an agent may only create tokens bound to the same agent")
	}
	t, value, err := a.deps.Tokens.Create(c.Request.Context(), req.Name, req.Kind, bindTo.ID)
	if err != nil {
		return err
	}
	resp := createTokenResponse{ID: t.ID, Token: value, Name: t.Name, Kind: t.Kind}
	if t.AgentID != "" {
		resp.AgentID = &t.AgentID
	}
	return writeJSON(c, http.StatusCreated, resp)
}

// revokeToken: DELETE /api/tokens/{tokenId}. A bound admin may revoke only tokens bound to its
// agent; any other token is NOT_FOUND to it, as another tenant's object.
func (a *API) revokeToken(c *gin.Context) error {
	id := c.Param("tokenId")
	if p := principalOf(c); p.AgentID != "" {
		t, err := a.deps.Tokens.Get(c.Request.Context(), id)
		if errors.Is(err, auth.ErrNotFound) || err == nil && t.AgentID != p.AgentID {
			return Errorf(errcode.NotFound, "token not found")
		}
		if err != nil {
			return err
		}
	}
	if err := a.deps.Tokens.Revoke(c.Request.Context(), id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// validateName checks a required display name: 1 to maxNameLen characters, no control characters.
func validateName(field, name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return InvalidField(field, "is required")
	case !utf8.ValidString(name):
		return InvalidField(field, "is not valid UTF-8")
	case utf8.RuneCountInString(name) > maxNameLen:
		return InvalidField(field, "is longer than %d characters", maxNameLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return InvalidField(field, "contains a control character")
	}
	return nil
}

// validateClaim checks an optional runtime token claim.
func validateClaim(field, v string) error {
	switch {
	case len(v) > maxClaimLen:
		return InvalidField(field, "is longer than %d bytes", maxClaimLen)
	case !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0:
		return InvalidField(field, "contains a control character or invalid UTF-8")
	}
	return nil
}
