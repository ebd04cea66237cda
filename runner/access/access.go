package access

import (
	"errors"
	"fmt"
	"time"
)

// Method is how a request authenticated, recorded on the turn's root span as svc.auth.method.
type Method string

// The credential kinds of CONTRACT §8.
const (
	MethodNone           Method = "none"            // no authentication configured (local development)
	MethodAuthToken      Method = "auth_token"      // the AUTH_TOKEN bearer of svc dev
	MethodRuntimeToken   Method = "runtime_token"   // a runtime token minted by the platform
	MethodAPIKey         Method = "api_key"         // an ak_ agent API key
	MethodBrowserSession Method = "browser_session" // the svc_session cookie of the sign-in flow
	MethodOIDCToken      Method = "oidc_token"      // a bearer JWT of the agent's identity provider
	MethodChannel        Method = "channel"         // a verified delivery of a messaging channel (svc.json channels)
)

// Conditions callers branch on. Each names the answer the runtime gives (CONTRACT §8).
var (
	// ErrUnauthenticated: the credential is not valid (401). Every refusal of an identity-provider
	// token, a state cookie's ID token or a browser session wraps it, beside a more precise error.
	ErrUnauthenticated = errors.New("access: unauthenticated")
	// ErrTokenExpired: a genuine token past its expiry; the error is also an *ExpiredError.
	ErrTokenExpired = errors.New("access: token expired")
	// ErrWrongAudience: the token is for another client (its aud names none of the audiences).
	ErrWrongAudience = errors.New("access: token is for another audience")
	// ErrBadSignature: no key of the provider's key set verifies the token.
	ErrBadSignature = errors.New("access: token signature does not verify")
	// ErrUnknownIssuer: the token's iss is not the agent's configured issuer.
	ErrUnknownIssuer = errors.New("access: token from an unknown issuer")
	// ErrMalformedToken: the value is not a signed JWT.
	ErrMalformedToken = errors.New("access: malformed token")
	// ErrMissingClaim: the token lacks the claim that names the user.
	ErrMissingClaim = errors.New("access: token lacks the user claim")
	// ErrNonce: the ID token's nonce is not the one the sign-in sent.
	ErrNonce = errors.New("access: ID token nonce does not match the sign-in")
	// ErrNoSession: the browser session is unknown, ended, expired or of another agent.
	ErrNoSession = errors.New("access: no such browser session")

	// ErrState: the sign-in's state cookie is missing, forged, expired or does not match the
	// callback's state (400).
	ErrState = errors.New("access: sign-in state does not match")
	// ErrReturnTo: return_to is not a path on the agent's host (400); the error is a *ReturnToError.
	ErrReturnTo = errors.New("access: return_to must be a path on this host")
	// ErrProvider: the identity provider refused the sign-in or the code exchange, or could not be
	// reached; the error says which. The runtime answers 502 when the provider was unreachable and
	// 401 otherwise (see ProviderError.Unreachable).
	ErrProvider = errors.New("access: identity provider refused the sign-in")

	// ErrAccessDenied: a verified user no allow rule admits (403 ACCESS_DENIED).
	ErrAccessDenied = errors.New("access: user not admitted by the agent's allow rules")
	// ErrScopeForbidden: a scope_id the caller may not use (403 scope_forbidden); the error is a
	// *ScopeError.
	ErrScopeForbidden = errors.New("access: scope_id forbidden for this caller")
	// ErrCSRF: a cookie-authenticated state-changing request from another origin (403 CSRF_REJECTED).
	ErrCSRF = errors.New("access: cross-site request rejected")
)

// ExpiredError is a genuine token past its expiry. It matches ErrTokenExpired and ErrUnauthenticated.
type ExpiredError struct{ At time.Time }

// Error implements error.
func (e *ExpiredError) Error() string {
	return "access: token expired at " + e.At.UTC().Format(time.RFC3339)
}

// Unwrap returns ErrTokenExpired and ErrUnauthenticated.
func (e *ExpiredError) Unwrap() []error { return []error{ErrTokenExpired, ErrUnauthenticated} }

// ScopeError is a scope_id refused by the scope rule of spec 5.4. It matches ErrScopeForbidden.
type ScopeError struct {
	Requested string // the scope_id of the request
	UserID    string // the caller's user id, the one scope it may name besides the agent's
}

// Error implements error.
func (e *ScopeError) Error() string {
	return fmt.Sprintf("access: scope_id %q is forbidden: a signed-in user without a scope claim may send no scope_id or its own user id %q", e.Requested, e.UserID)
}

// Unwrap returns ErrScopeForbidden.
func (e *ScopeError) Unwrap() error { return ErrScopeForbidden }

// ReturnToError is a refused return_to. It matches ErrReturnTo.
type ReturnToError struct {
	Value  string // as sent
	Reason string // what is wrong with it
}

// Error implements error.
func (e *ReturnToError) Error() string {
	return fmt.Sprintf("access: return_to %q: %s", e.Value, e.Reason)
}

// Unwrap returns ErrReturnTo.
func (e *ReturnToError) Unwrap() error { return ErrReturnTo }

// ProviderError is a refusal or failure of the identity provider during the sign-in. It matches
// ErrProvider.
type ProviderError struct {
	Code        string // the OAuth error code (access_denied, invalid_grant, …), "" when unknown
	Description string // the provider's error_description, or what went wrong
	// Unreachable is true when the provider could not be reached or answered garbage (502), false
	// when it answered with a refusal (401).
	Unreachable bool
}

// Error implements error.
func (e *ProviderError) Error() string {
	if e.Code == "" {
		return "access: identity provider: " + e.Description
	}
	return fmt.Sprintf("access: identity provider refused (%s): %s", e.Code, e.Description)
}

// Unwrap returns ErrProvider.
func (e *ProviderError) Unwrap() error { return ErrProvider }
