package access

import (
	"net/http"
	"time"
)

// Cookie names.
const (
	// SessionCookieName is the browser session cookie; its value is the session's secret (see
	// NewSessionCookie).
	SessionCookieName = "svc_session"
	// StateCookieName carries a sign-in's sealed state from /auth/login to /auth/callback.
	StateCookieName = "svc_auth_state"
)

// SessionCookie is the Set-Cookie of a browser session: HttpOnly, SameSite=Lax, Path=/, host-only
// (no Domain, so no other host under the same domain receives it), Secure when secure (the request
// or SVC_PUBLIC_URL is https), until expires (the session's ExpiresAt).
func SessionCookie(value string, expires time.Time, secure bool) *http.Cookie {
	return &http.Cookie{
		Name: SessionCookieName, Value: value, Path: "/",
		Expires:  expires,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
}

// ClearSessionCookie is the Set-Cookie that removes the browser session cookie (logout).
func ClearSessionCookie(secure bool) *http.Cookie {
	return &http.Cookie{
		Name: SessionCookieName, Path: "/", MaxAge: -1, Expires: time.Unix(0, 0),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
}

// StateCookie is the Set-Cookie of a sign-in's state (LoginRedirect.StateCookie), sent back only
// to the callback. SameSite=Lax lets the provider's top-level redirect carry it.
func StateCookie(value string, expires time.Time, secure bool) *http.Cookie {
	return &http.Cookie{
		Name: StateCookieName, Value: value, Path: CallbackPath,
		Expires:  expires,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
}

// ClearStateCookie is the Set-Cookie that removes the state cookie once the callback used it.
func ClearStateCookie(secure bool) *http.Cookie {
	return &http.Cookie{
		Name: StateCookieName, Path: CallbackPath, MaxAge: -1, Expires: time.Unix(0, 0),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
}
