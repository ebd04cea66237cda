package access

import "time"

// Identity is who sent a request: resolved once per request from its credential, read by every
// visibility and scope rule. The zero Identity is an unauthenticated caller of a runtime without
// authentication (Method ""); use MethodNone for that case explicitly.
type Identity struct {
	// UserID is the verified user; "" for trusted service credentials (an ak_ key, AUTH_TOKEN, a
	// runtime token minted without user_id, no authentication), which keep access to owned sessions
	// (spec 4.6 rule 3).
	UserID string
	// Email is the user's e-mail as the identity provider states it; "" when unknown.
	Email string
	// EmailVerified is false when the provider says the e-mail is not verified (email_verified:
	// false); the allow rules on e-mails and domains then do not apply to it.
	EmailVerified bool
	// OrgID is the value of the provider's orgClaim (svc.user.org_id); "" when none.
	OrgID string
	// Groups are the values of the provider's groupsClaim.
	Groups []string
	// Scope is the credential's scope_id claim; "" when it has none.
	Scope string
	// Method is the credential kind (svc.auth.method).
	Method Method
	// CredentialID identifies the credential where it has an id: the API key's id, the pk_ token
	// that minted a runtime token, the browser
	// session's id (the hash of its cookie); "" otherwise.
	CredentialID string
	// ExpiresAt is when the credential expires; zero when it does not.
	ExpiresAt time.Time
}

// User is the signed-in user as the allow rules see it.
type User struct {
	ID            string
	Email         string
	EmailVerified bool
	OrgID         string
	Groups        []string
}

// User returns the part of id the allow rules read.
func (id Identity) User() User {
	return User{ID: id.UserID, Email: id.Email, EmailVerified: id.EmailVerified, OrgID: id.OrgID, Groups: id.Groups}
}

// Trusted reports whether id is a trusted service credential: one with no verified user (an ak_
// key, AUTH_TOKEN, a runtime token without user_id, no authentication). Only trusted callers may
// use the inspect routes, and they see sessions whoever owns them (spec 4.6 rules 3 and 5).
func (id Identity) Trusted() bool { return id.UserID == "" }

// EndUser reports whether id is a user signed in with the agent's identity provider, through a
// browser session or a bearer token of the provider. Without a scope claim such a user is held to
// the scope rule of spec 5.4 (see ScopeFor).
func (id Identity) EndUser() bool {
	return id.Method == MethodBrowserSession || id.Method == MethodOIDCToken
}

// ScopeFor is the scope a request of id works in, given the scope_id it sent ("" for the
// agent-level scope):
//   - a scope claim overrides the request (spec 4.6 rule 6);
//   - an end user without a scope claim may send no scope_id or its own user id; any other
//     scope_id is a *ScopeError (spec 5.4, 403 scope_forbidden);
//   - any other caller gets the scope it asked for.
func (id Identity) ScopeFor(requested string) (string, error) {
	switch {
	case id.Scope != "":
		return id.Scope, nil
	case id.EndUser() && requested != "" && requested != id.UserID:
		return "", &ScopeError{Requested: requested, UserID: id.UserID}
	default:
		return requested, nil
	}
}

// Sees reports whether id may see a session (or durable run) owned by owner ("" for none) in
// scope ("" for the agent-level scope), under spec 4.6 rules 2, 3 and 6: not when another
// verified user owns it, nor when id's scope claim names another scope. Sessions without an
// owner are shared, and trusted credentials see owned ones. A run id may not see is answered 404,
// the same as an unknown id, and never reaches id's event stream (CONTRACT §8).
func (id Identity) Sees(owner, scope string) bool {
	if owner != "" && id.UserID != "" && owner != id.UserID {
		return false
	}
	if id.Scope != "" && scope != id.Scope {
		return false
	}
	return true
}
