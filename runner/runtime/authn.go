package runtime

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"svc/auth"
)

// Authentication methods, recorded as svc.auth.method.
const (
	MethodNone         = "none"          // no authentication configured (local development)
	MethodAuthToken    = "auth_token"    // the AUTH_TOKEN bearer of svc dev
	MethodRuntimeToken = "runtime_token" // a signed runtime token
)

// caller is who sent a request.
type caller struct {
	// userID is the verified user; "" for trusted server credentials, which keep access to
	// owned sessions (spec §4.6 rule 3).
	userID string
	// scope is the token's scope_id claim; "" when the token has none.
	scope  string
	method string
}

// authenticate checks the bearer credential of r.
func (rt *Runtime) authenticate(r *http.Request) (*caller, error) {
	if rt.opts.Verifier == nil && rt.opts.AuthToken == "" {
		return &caller{method: MethodNone}, nil
	}
	token := auth.Bearer(r.Header.Get("Authorization"))
	if token == "" {
		return nil, &APIError{Code: CodeUnauthenticated, Message: "send Authorization: Bearer <runtime token>"}
	}
	if rt.opts.AuthToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(rt.opts.AuthToken)) == 1 {
		return &caller{method: MethodAuthToken}, nil
	}
	if strings.HasPrefix(token, auth.PlatformPrefix) || strings.HasPrefix(token, auth.AgentKeyPrefix) {
		return nil, &APIError{Code: CodeUnauthenticated, Message: "pk_ and ak_ credentials cannot authorize runtime chat; mint a runtime token with POST /api/agents/{agent_id}/tokens"}
	}
	if rt.opts.Verifier == nil {
		return nil, apiErr(CodeUnauthenticated)
	}
	claims, err := rt.opts.Verifier.Verify(token)
	var expired *auth.ExpiredError
	switch {
	case errors.As(err, &expired):
		return nil, &APIError{Code: CodeUnauthenticated, Message: "the runtime token expired at " + expired.At.Format(time.RFC3339) + "; mint a new one with POST /api/agents/{agent_id}/tokens"}
	case errors.Is(err, auth.ErrMinterRevoked):
		return nil, &APIError{Code: CodeUnauthenticated, Message: "the pk_ token that minted this runtime token was revoked; mint a new one with a valid token"}
	case err != nil:
		return nil, apiErr(CodeUnauthenticated)
	}
	if rt.opts.AgentID != "" && claims.AgentID != rt.opts.AgentID {
		return nil, &APIError{Code: CodeForbidden, Message: "the runtime token is for another agent"}
	}
	return &caller{userID: claims.UserID, scope: claims.ScopeID, method: MethodRuntimeToken}, nil
}

// trusted refuses an end user: the inspect routes show the agent's whole system prompt and its
// connections' resolved addresses, for the application's backend and its developers (a runtime
// token without a user id, AUTH_TOKEN, or no authentication under svc dev), not for the
// browser of a verified user.
func (c *caller) trusted() error {
	if c.userID != "" {
		return &APIError{Code: CodeForbidden, Message: "the inspect routes need a trusted caller: a runtime token minted without user_id"}
	}
	return nil
}
