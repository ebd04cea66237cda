package runtime

import (
	"context"
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
	MethodAPIKey       = "api_key"       // an ak_ agent API key
)

// KeyChecker checks ak_ agent API keys (auth.Keys implements it, with no database read per
// request on the hot path). Check returns the key of value, an error wrapping
// auth.ErrUnauthenticated for an unknown or revoked key, or another error when it cannot tell.
type KeyChecker interface {
	Check(ctx context.Context, value string) (auth.AgentKey, error)
}

// caller is who sent a request.
type caller struct {
	// userID is the verified user; "" for trusted server credentials, which keep access to
	// owned sessions (spec §4.6 rule 3).
	userID string
	// scope is the token's scope_id claim; "" when the token has none.
	scope  string
	method string
	// credentialID is the API key's id for an ak_ key; "" otherwise.
	credentialID string
}

// authenticate checks the bearer credential of r.
func (rt *Runtime) authenticate(r *http.Request) (*caller, error) {
	if rt.opts.Verifier == nil && rt.opts.AuthToken == "" && rt.opts.Keys == nil {
		return &caller{method: MethodNone}, nil
	}
	token := auth.Bearer(r.Header.Get("Authorization"))
	if token == "" {
		return nil, &APIError{Code: CodeUnauthenticated, Message: "send Authorization: Bearer <runtime token>"}
	}
	if rt.opts.AuthToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(rt.opts.AuthToken)) == 1 {
		return &caller{method: MethodAuthToken}, nil
	}
	if strings.HasPrefix(token, auth.AgentKeyPrefix) {
		return rt.apiKey(r.Context(), token)
	}
	if strings.HasPrefix(token, auth.PlatformPrefix) {
		return nil, &APIError{Code: CodeUnauthenticated, Message: "a pk_ platform token cannot call an agent; send one of the agent's ak_ API keys or a runtime token minted with POST /api/agents/{agent_id}/tokens"}
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

// apiKey authenticates an ak_ key: one of this agent's is a trusted service credential with no
// user (spec 4.6 rules 3 and 5); another agent's is 401, the same as an unknown key, so that a
// key learns nothing about other agents.
func (rt *Runtime) apiKey(ctx context.Context, value string) (*caller, error) {
	if rt.opts.Keys == nil {
		return nil, &APIError{Code: CodeUnauthenticated, Message: "this runtime accepts no ak_ API keys; send a runtime token"}
	}
	key, err := rt.opts.Keys.Check(ctx, value)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated) || err == nil && rt.opts.AgentID != "" && key.AgentID != rt.opts.AgentID:
		return nil, &APIError{Code: CodeUnauthenticated, Message: "unknown or revoked API key for this agent; list the agent's keys with svc agents keys list"}
	case err != nil:
		return nil, err
	}
	return &caller{method: MethodAPIKey, credentialID: key.ID}, nil
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
