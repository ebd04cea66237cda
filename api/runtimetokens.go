package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"svc/auth"
)

type runtimeTokenRequest struct {
	TTL     *int   `json:"ttl,omitempty" doc:"lifetime in seconds, 60 to 86400; 3600 when absent"`
	ScopeID string `json:"scope_id,omitempty" doc:"scope claim: overrides the scope of chat requests"`
	UserID  string `json:"user_id,omitempty" doc:"sub claim: the verified user"`
}

type runtimeTokenResponse struct {
	Token     string    `json:"token" doc:"the runtime JWT"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// mintRuntimeToken: POST /api/agents/{id}/tokens (operator or admin, bound to the agent or unbound).
func (a *API) mintRuntimeToken(c *gin.Context) error {
	var req runtimeTokenRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	ttl := auth.DefaultRuntimeTTL
	if req.TTL != nil {
		ttl = time.Duration(*req.TTL) * time.Second
		if ttl < auth.MinRuntimeTTL || ttl > auth.MaxRuntimeTTL {
			return InvalidField("ttl", "must be between %d and %d seconds", int(auth.MinRuntimeTTL.Seconds()), int(auth.MaxRuntimeTTL.Seconds()))
		}
	}
	if err := validateClaim("scope_id", req.ScopeID); err != nil {
		return err
	}
	if err := validateClaim("user_id", req.UserID); err != nil {
		return err
	}
	exp := time.Now().Add(ttl).Truncate(time.Second).UTC()
	minter, _ := PrincipalFrom(c)
	token, err := a.deps.Signer.Mint(auth.RuntimeClaims{UserID: req.UserID, AgentID: agentOf(c).ID, ScopeID: req.ScopeID, ExpiresAt: exp, MintedBy: minter.TokenID})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, runtimeTokenResponse{Token: token, ExpiresAt: exp})
}
