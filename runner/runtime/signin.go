package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"svc/runner/access"
)

// Access are the sign-in services of a process (CONTRACT §8), built once and shared by its
// runtimes: with them a runtime accepts, after its own credentials, a bearer token of the
// agent's identity provider (oidc_token) and the svc_session cookie (browser_session), and serves
// /auth/login, /auth/callback, /auth/me and /auth/logout. All fields but SecureCookies are required.
type Access struct {
	// Settings are the agents' access settings, read again within seconds of a change
	// (access.SettingsCache): an agent without any accepts neither credential.
	Settings AccessSettings
	// Providers discover the agents' identity providers and verify their tokens.
	Providers *access.Providers
	// Sessions keep the browser sessions where every runner sees them; a logout on another
	// runner is seen here within the cache's TTL.
	Sessions *access.SessionCache
	// SignIn runs the authorization-code flow; its key is the same on every runner.
	SignIn *access.SignIn
	// SecureCookies marks the cookies Secure whatever the request's scheme (SVC_PUBLIC_URL is
	// https, and a proxy in front ends TLS).
	SecureCookies bool
}

// AccessSettings return an agent's access settings: nil (and no error) when it has none.
// access.SettingsCache implements it. Safe for concurrent use.
type AccessSettings interface {
	Settings(ctx context.Context, agentID string) (*access.Settings, error)
}

// signinRoutes authenticate the sign-in credentials and serve the /auth routes of one runtime.
type signinRoutes struct {
	cfg     *Access // nil: no sign-in on this runtime
	agentID string
	env     func(name string) (string, bool)
	log     *slog.Logger
}

// enabled reports whether the runtime accepts the sign-in credentials at all.
func (s *signinRoutes) enabled() bool { return s.cfg != nil }

// settings are the agent's access settings, or a not_found refusal naming what to set when the
// agent has none (or no identity provider).
func (s *signinRoutes) settings(ctx context.Context) (*access.Settings, error) {
	if s.cfg == nil {
		return nil, &APIError{Code: CodeNotFound, Message: "this runtime has no sign-in"}
	}
	set, err := s.cfg.Settings.Settings(ctx, s.agentID)
	if err != nil {
		return nil, err
	}
	if set == nil || set.OIDC == nil {
		return nil, &APIError{Code: CodeNotFound, Message: "the agent has no sign-in: set its identity provider with PUT /api/agents/{id}/access"}
	}
	return set, nil
}

// origin is the agent's "scheme://host" as the browser sees it.
func (s *signinRoutes) origin(r *http.Request) string {
	if s.secure(r) {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// secure reports whether the browser reached the agent over https (the request, or
// SVC_PUBLIC_URL when a proxy ends TLS).
func (s *signinRoutes) secure(r *http.Request) bool {
	return r.TLS != nil || (s.cfg != nil && s.cfg.SecureCookies)
}

// bearer authenticates a bearer JWT of the agent's identity provider (oidc_token).
func (s *signinRoutes) bearer(r *http.Request, token string) (access.Identity, error) {
	set, err := s.cfg.Settings.Settings(r.Context(), s.agentID)
	if err != nil {
		return access.Identity{}, err
	}
	if set == nil || set.OIDC == nil {
		return access.Identity{}, &APIError{Code: CodeUnauthenticated, Message: "the bearer token is not a runtime token, and the agent accepts no identity-provider tokens (it has no access settings)"}
	}
	id, err := s.cfg.Providers.VerifyBearer(r.Context(), set, token)
	if err != nil {
		return access.Identity{}, providerErr(err)
	}
	return id, nil
}

// cookie authenticates the svc_session cookie (browser_session): a live session of this agent,
// of a user the allow rules admit now, and the CSRF rule on a state-changing request.
func (s *signinRoutes) cookie(r *http.Request, value string) (access.Identity, error) {
	set, err := s.cfg.Settings.Settings(r.Context(), s.agentID)
	if err != nil {
		return access.Identity{}, err
	}
	if set == nil || set.OIDC == nil {
		return access.Identity{}, &APIError{Code: CodeUnauthenticated, Message: "the agent has no sign-in any more; send a runtime token"}
	}
	id, err := s.cfg.Sessions.Identity(r.Context(), s.agentID, value)
	if err != nil {
		return access.Identity{}, err
	}
	if !set.Admits(id.User()) {
		return access.Identity{}, fmt.Errorf("%w: %s is no longer admitted by the agent's allow rules", access.ErrAccessDenied, id.UserID)
	}
	if err := access.CheckCSRF(r, s.origin(r)); err != nil {
		return access.Identity{}, err
	}
	return id, nil
}

// login: GET /auth/login?return_to=/path, 302 to the provider with the state cookie set.
func (s *signinRoutes) login(w http.ResponseWriter, r *http.Request) error {
	set, err := s.settings(r.Context())
	if err != nil {
		return err
	}
	to, err := s.cfg.SignIn.Login(r.Context(), set, s.origin(r), r.URL.Query().Get("return_to"))
	if err != nil {
		return providerErr(err)
	}
	http.SetCookie(w, access.StateCookie(to.StateCookie, to.Expires, s.secure(r)))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to.URL, http.StatusFound)
	return nil
}

// callback: GET /auth/callback, the provider's redirect. It always clears the state cookie (a
// sign-in's state serves once); on success it stores the browser session, sets svc_session and
// sends the browser to the sign-in's return_to.
func (s *signinRoutes) callback(w http.ResponseWriter, r *http.Request) error {
	secure := s.secure(r)
	http.SetCookie(w, access.ClearStateCookie(secure))
	w.Header().Set("Cache-Control", "no-store")
	// 1. The settings and the client secret, from the agent's environment.
	set, err := s.settings(r.Context())
	if err != nil {
		return err
	}
	var secret string
	if name := set.ClientSecretEnv(); name != "" {
		v, ok := s.lookup(name)
		if !ok {
			s.log.ErrorContext(r.Context(), "sign-in: the client secret is not set", "variable", name)
			return &APIError{Code: CodeInternal, Message: fmt.Sprintf("the sign-in's client secret (oidc.clientSecret env:%s) is not set: set it with `svc secrets set <agent> %s`", name, name)}
		}
		secret = v
	}
	// 2. The flow: state, code, ID token, allow rules.
	var state string
	if c, err := r.Cookie(access.StateCookieName); err == nil {
		state = c.Value
	}
	in, err := s.cfg.SignIn.Callback(r.Context(), set, s.origin(r), r.URL.Query(), state, secret)
	if err != nil {
		return providerErr(err)
	}
	// 3. The session, kept where every runner sees it.
	value, bs, err := s.cfg.Sessions.Create(r.Context(), s.agentID, in.Identity)
	if err != nil {
		return err
	}
	http.SetCookie(w, access.SessionCookie(value, bs.ExpiresAt, secure))
	http.Redirect(w, r, in.ReturnTo, http.StatusFound)
	return nil
}

// lookup reads a variable of the agent's environment.
func (s *signinRoutes) lookup(name string) (string, bool) {
	if s.env == nil {
		return "", false
	}
	return s.env(name)
}

// meResponse is the body of GET /auth/me.
type meResponse struct {
	UserID     string     `json:"user_id"`
	Email      string     `json:"email"`
	OrgID      string     `json:"org_id"`
	AuthMethod string     `json:"auth_method"`
	ExpiresAt  *time.Time `json:"expires_at"`
}

// me: GET /auth/me, who the request's credential is.
func (s *signinRoutes) me(w http.ResponseWriter, _ *http.Request, who access.Identity) error {
	out := meResponse{UserID: who.UserID, Email: who.Email, OrgID: who.OrgID, AuthMethod: string(who.Method)}
	if !who.ExpiresAt.IsZero() {
		at := who.ExpiresAt.UTC()
		out.ExpiresAt = &at
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
	return nil
}

// logout: POST /auth/logout. A browser session ends on every runner (at once here, within the
// session cache's TTL elsewhere) and its cookie is cleared; 204.
func (s *signinRoutes) logout(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	if who.Method == access.MethodBrowserSession {
		c, err := r.Cookie(access.SessionCookieName)
		if err == nil {
			if err := s.cfg.Sessions.End(r.Context(), c.Value); err != nil {
				return err
			}
		}
	}
	http.SetCookie(w, access.ClearSessionCookie(s.secure(r)))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// providerErr maps the sign-in's own refusals to the runtime's answers; the rest (401, 403
// ACCESS_DENIED) writeError maps.
func providerErr(err error) error {
	var rt *access.ReturnToError
	var pe *access.ProviderError
	switch {
	case errors.As(err, &rt):
		return &APIError{Code: CodeInvalidRequest, Field: "return_to", Message: strings.TrimPrefix(err.Error(), "access: ")}
	case errors.Is(err, access.ErrState):
		return &APIError{Code: CodeInvalidRequest, Field: "state", Message: strings.TrimPrefix(err.Error(), "access: ")}
	case errors.As(err, &pe) && pe.Unreachable:
		return &APIError{Code: CodeProviderDown, Message: strings.TrimPrefix(err.Error(), "access: ")}
	case errors.As(err, &pe):
		return &APIError{Code: CodeUnauthenticated, Message: strings.TrimPrefix(err.Error(), "access: ")}
	}
	return err
}

// runtimeTokenAlg reports whether a bearer JWT's header names HS256, the algorithm of runtime
// tokens (an identity provider's tokens are asymmetric). An unreadable header counts as a
// runtime token, which its verifier then refuses.
func runtimeTokenAlg(token string) bool {
	head, _, ok := strings.Cut(token, ".")
	if !ok {
		return true
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return true
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return true
	}
	return h.Alg == "" || h.Alg == "HS256"
}

// plain serves h without authentication (the sign-in's own routes), writing its error and
// recovering a panic as handle does.
func plain(log *slog.Logger, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.ErrorContext(r.Context(), "handler panicked", "path", r.URL.Path, "panic", v)
				writeError(w, r, log, apiErr(CodeInternal))
			}
		}()
		if err := h(w, r); err != nil {
			writeError(w, r, log, err)
		}
	})
}
