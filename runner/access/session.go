package access

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"time"
)

// SessionTTL is how long a browser session lasts from its sign-in.
const SessionTTL = 12 * time.Hour

// ErrSessionNotFound is what a Sessions answers for an id it does not hold.
var ErrSessionNotFound = errors.New("access: browser session not found")

// BrowserSession is a signed-in user's session on an agent's host, kept where every runner sees
// it. Its ID is the hash of the cookie value (see SessionID): the cookie itself is never stored.
type BrowserSession struct {
	ID        string   // SessionID of the cookie value: base64url SHA-256, 43 characters
	AgentID   string   // the agent signed in to
	UserID    string   // the provider's user claim
	Email     string   // "" when the provider gave none
	EmailOK   bool     // false when the provider said the e-mail is not verified
	OrgID     string   // the orgClaim value, "" when none
	Groups    []string // the groupsClaim values
	Scope     string   // the ID token's scope_id claim, "" when none
	CreatedAt time.Time
	ExpiresAt time.Time // CreatedAt + SessionTTL
	EndedAt   time.Time // zero while not ended (logout)
}

// Sessions keep browser sessions where every runner sees them: the platform's database, or memory
// for svc dev (memsessions). Implementations are safe for concurrent use, honour ctx, and run
// sessionstest.Run.
type Sessions interface {
	// Create stores s; s.ID is new (a hash of 32 random bytes).
	Create(ctx context.Context, s BrowserSession) error
	// Get returns the session with id whether it is ended or expired or not, or an error matching
	// ErrSessionNotFound when there is none.
	Get(ctx context.Context, id string) (BrowserSession, error)
	// End records that the session with id ended at at (the first End wins; ending an ended
	// session is no error), or returns an error matching ErrSessionNotFound when there is none.
	End(ctx context.Context, id string, at time.Time) error
}

// NewSessionCookie returns a new cookie value (32 random bytes, base64url) and its SessionID.
func NewSessionCookie() (cookie, id string) {
	cookie = randomString()
	return cookie, SessionID(cookie)
}

// SessionID is the stored id of a session cookie value: its SHA-256, base64url. A database leak
// gives no usable cookie.
func SessionID(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// check says whether s authenticates a request to agentID at now: an error matching ErrNoSession
// and ErrUnauthenticated when it is of another agent, ended or expired.
func (s BrowserSession) check(agentID string, now time.Time) error {
	switch {
	case s.AgentID != agentID:
		return &noSessionError{reason: "it is another agent's"}
	case !s.EndedAt.IsZero():
		return &noSessionError{reason: "it was ended (signed out)"}
	case !now.Before(s.ExpiresAt):
		return &noSessionError{reason: "it expired at " + s.ExpiresAt.UTC().Format(time.RFC3339)}
	}
	return nil
}

// noSessionError is a cookie that names no usable session.
type noSessionError struct{ reason string }

// Error implements error.
func (e *noSessionError) Error() string { return "access: no usable browser session: " + e.reason }

// Unwrap returns ErrNoSession and ErrUnauthenticated.
func (e *noSessionError) Unwrap() []error { return []error{ErrNoSession, ErrUnauthenticated} }

// Identity is the Identity a request authenticated by s has.
func (s BrowserSession) Identity() Identity {
	return Identity{
		UserID: s.UserID, Email: s.Email, EmailVerified: s.EmailOK, OrgID: s.OrgID, Groups: s.Groups,
		Scope: s.Scope, Method: MethodBrowserSession, CredentialID: s.ID, ExpiresAt: s.ExpiresAt,
	}
}
