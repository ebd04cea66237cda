package runtime

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"svc/auth"
	"svc/runner/access"
)

// Authentication methods, recorded as svc.auth.method (the values of access.Method).
const (
	MethodNone         = "none"          // no authentication configured (local development)
	MethodAuthToken    = "auth_token"    // the AUTH_TOKEN bearer of svc dev
	MethodRuntimeToken = "runtime_token" // a signed runtime token
	MethodAPIKey       = "api_key"       // an ak_ agent API key
)

// KeyChecker checks ak_ agent API keys (auth.Keys implements it, with no database read per
// request on the hot path). Check returns the key of value, an error wrapping
// auth.ErrUnauthenticated for an unknown or revoked key, or another error when it cannot tell.
type KeyChecker interface {
	Check(ctx context.Context, value string) (auth.AgentKey, error)
}

// authenticate resolves who sent r, once per request: AUTH_TOKEN, then an ak_ key, then a
// runtime token (an HS256 JWT), then, with Options.Access, a bearer JWT of the agent's identity
// provider; without an Authorization header, the svc_session cookie. The Identity it returns is
// what every visibility and scope rule reads.
func (rt *Runtime) authenticate(r *http.Request) (access.Identity, error) {
	if rt.opts.Verifier == nil && rt.opts.AuthToken == "" && rt.opts.Keys == nil && !rt.signin.enabled() {
		return access.Identity{Method: access.MethodNone}, nil
	}
	token := auth.Bearer(r.Header.Get("Authorization"))
	if token == "" {
		if c, err := r.Cookie(access.SessionCookieName); err == nil && rt.signin.enabled() {
			return rt.signin.cookie(r, c.Value)
		}
		return access.Identity{}, &APIError{Code: CodeUnauthenticated, Message: "send Authorization: Bearer <runtime token>"}
	}
	if rt.opts.AuthToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(rt.opts.AuthToken)) == 1 {
		return access.Identity{Method: access.MethodAuthToken}, nil
	}
	if strings.HasPrefix(token, auth.AgentKeyPrefix) {
		return rt.apiKey(r.Context(), token)
	}
	if strings.HasPrefix(token, auth.PlatformPrefix) {
		return access.Identity{}, &APIError{Code: CodeUnauthenticated, Message: "a pk_ platform token cannot call an agent; send one of the agent's ak_ API keys or a runtime token minted with POST /api/agents/{agent_id}/tokens"}
	}
	if rt.signin.enabled() && !runtimeTokenAlg(token) {
		return rt.signin.bearer(r, token)
	}
	if rt.opts.Verifier == nil {
		return access.Identity{}, apiErr(CodeUnauthenticated)
	}
	claims, err := rt.opts.Verifier.Verify(token)
	var expired *auth.ExpiredError
	switch {
	case errors.As(err, &expired):
		return access.Identity{}, &APIError{Code: CodeUnauthenticated, Message: "the runtime token expired at " + expired.At.Format(time.RFC3339) + "; mint a new one with POST /api/agents/{agent_id}/tokens"}
	case errors.Is(err, auth.ErrMinterRevoked):
		return access.Identity{}, &APIError{Code: CodeUnauthenticated, Message: "the pk_ token that minted this runtime token was revoked; mint a new one with a valid token"}
	case err != nil:
		return access.Identity{}, apiErr(CodeUnauthenticated)
	}
	if rt.opts.AgentID != "" && claims.AgentID != rt.opts.AgentID {
		return access.Identity{}, &APIError{Code: CodeForbidden, Message: "the runtime token is for another agent"}
	}
	return access.Identity{UserID: claims.UserID, Scope: claims.ScopeID, Method: access.MethodRuntimeToken, CredentialID: claims.MintedBy, ExpiresAt: claims.ExpiresAt}, nil
}

// apiKey authenticates an ak_ key: one of this agent's is a trusted service credential with no
// user (spec 4.6 rules 3 and 5); another agent's is 401, the same as an unknown key, so that a
// key learns nothing about other agents.
func (rt *Runtime) apiKey(ctx context.Context, value string) (access.Identity, error) {
	if rt.opts.Keys == nil {
		return access.Identity{}, &APIError{Code: CodeUnauthenticated, Message: "this runtime accepts no ak_ API keys; send a runtime token"}
	}
	key, err := rt.opts.Keys.Check(ctx, value)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated) || err == nil && rt.opts.AgentID != "" && key.AgentID != rt.opts.AgentID:
		return access.Identity{}, &APIError{Code: CodeUnauthenticated, Message: "unknown or revoked API key for this agent; list the agent's keys with svc agents keys list"}
	case err != nil:
		return access.Identity{}, err
	}
	return access.Identity{Method: access.MethodAPIKey, CredentialID: key.ID}, nil
}

// trusted refuses an end user: the inspect routes show the agent's whole system prompt and its
// connections' resolved addresses, for the application's backend and its developers (a runtime
// token without a user id, AUTH_TOKEN, or no authentication under svc dev), not for the
// browser of a verified user.
func trusted(who access.Identity) error {
	if !who.Trusted() {
		return &APIError{Code: CodeForbidden, Message: "the inspect routes need a trusted caller: a runtime token minted without user_id"}
	}
	return nil
}
