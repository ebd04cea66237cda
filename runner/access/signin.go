package access

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// StateTTL is how long a sign-in may take, from /auth/login to /auth/callback.
const StateTTL = 10 * time.Minute

// CallbackPath is the path of the redirect URI on the agent's host.
const CallbackPath = "/auth/callback"

// scopes are the OAuth scopes the sign-in asks for (never changed: no mutable package state).
var scopes = []string{oidc.ScopeOpenID, "email", "profile"}

// SignIn runs the hosted browser sign-in (the authorization-code flow with PKCE S256, state and
// nonce) against the agent's OpenID provider. Its state travels in a cookie sealed with AES-GCM
// under the key given to NewSignIn, so any runner holding the key finishes a flow another runner
// started, and no server keeps it. Safe for concurrent use.
type SignIn struct {
	providers *Providers
	aead      cipher.AEAD
	now       func() time.Time
}

// NewSignIn returns a sign-in over providers, sealing its state under key (32 bytes, the same on
// every runner).
func NewSignIn(providers *Providers, key []byte) (*SignIn, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("access: the sign-in state key must hold 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("new sign-in cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("new sign-in cipher: %w", err)
	}
	return &SignIn{providers: providers, aead: aead, now: providers.now}, nil
}

// LoginRedirect is where /auth/login sends the browser.
type LoginRedirect struct {
	URL         string    // the provider's authorization URL, for a 302
	StateCookie string    // the value of the state cookie (see StateCookie)
	Expires     time.Time // when the state cookie expires
}

// SignedIn is the outcome of a callback: the verified, admitted user and where to send it.
type SignedIn struct {
	Identity Identity // Method MethodBrowserSession, no CredentialID yet
	ReturnTo string   // a path on the agent's host
}

// flowState is what the state cookie carries.
type flowState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	ReturnTo string `json:"r"`
	Origin   string `json:"o"`
	Issuer   string `json:"i"`
	ClientID string `json:"c"`
	Expires  int64  `json:"e"` // unix seconds
}

// stateAD binds a sealed state to its use.
var stateAD = []byte("svc access sign-in state v1")

// Login starts a sign-in on the agent at origin ("https://host[:port]", the agent's scheme and
// host): it checks returnTo (see CheckReturnTo; "" is "/"), and returns the provider's
// authorization URL, whose redirect URI is origin + CallbackPath, with the state cookie to set.
// A bad returnTo is a *ReturnToError (400); an unreachable provider a *ProviderError.
func (f *SignIn) Login(ctx context.Context, s *Settings, origin, returnTo string) (LoginRedirect, error) {
	if err := checkOrigin(origin); err != nil {
		return LoginRedirect{}, err
	}
	returnTo, err := CheckReturnTo(returnTo)
	if err != nil {
		return LoginRedirect{}, err
	}
	if s == nil || s.OIDC == nil {
		return LoginRedirect{}, errors.New("access: the agent has no identity provider")
	}
	p, err := f.providers.provider(ctx, s.OIDC.Issuer)
	if err != nil {
		return LoginRedirect{}, err
	}
	st := flowState{
		State:    randomString(),
		Nonce:    randomString(),
		Verifier: oauth2.GenerateVerifier(),
		ReturnTo: returnTo,
		Origin:   origin,
		Issuer:   s.OIDC.Issuer,
		ClientID: s.OIDC.ClientID,
		Expires:  f.now().Add(StateTTL).Unix(),
	}
	cookie, err := f.seal(st)
	if err != nil {
		return LoginRedirect{}, err
	}
	conf := oauthConfig(s, p, origin, "")
	return LoginRedirect{
		URL:         conf.AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oidc.Nonce(st.Nonce)),
		StateCookie: cookie,
		Expires:     time.Unix(st.Expires, 0),
	}, nil
}

// Callback finishes a sign-in: query is the callback's query, stateCookie the state cookie's value
// and clientSecret the resolved client secret ("" for a public client). It checks the state,
// exchanges the code with the PKCE verifier, verifies the ID token (signature, issuer, audience,
// nonce, expiry) and applies the allow rules. Refusals: ErrState (400); a *ProviderError when the
// provider refused or failed; ErrUnauthenticated with the token's problem, or ErrNonce (401);
// ErrAccessDenied (403 ACCESS_DENIED, no session).
func (f *SignIn) Callback(ctx context.Context, s *Settings, origin string, query url.Values, stateCookie, clientSecret string) (SignedIn, error) {
	if s == nil || s.OIDC == nil {
		return SignedIn{}, errors.New("access: the agent has no identity provider")
	}
	// 1. The state: sealed by us, for this agent and this flow, not expired.
	st, err := f.open(stateCookie)
	if err != nil {
		return SignedIn{}, err
	}
	if st.Origin != origin || st.Issuer != s.OIDC.Issuer || st.ClientID != s.OIDC.ClientID {
		return SignedIn{}, fmt.Errorf("%w: the sign-in was started for another agent or provider", ErrState)
	}
	if subtle.ConstantTimeCompare([]byte(query.Get("state")), []byte(st.State)) != 1 {
		return SignedIn{}, fmt.Errorf("%w: the callback's state is not the sign-in's", ErrState)
	}
	if code := query.Get("error"); code != "" {
		return SignedIn{}, &ProviderError{Code: code, Description: query.Get("error_description")}
	}
	code := query.Get("code")
	if code == "" {
		return SignedIn{}, &ProviderError{Code: "invalid_request", Description: "the callback carries no code"}
	}
	// 2. The code, exchanged with the verifier.
	p, err := f.providers.provider(ctx, s.OIDC.Issuer)
	if err != nil {
		return SignedIn{}, err
	}
	conf := oauthConfig(s, p, origin, clientSecret)
	tok, err := conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, f.providers.client), code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return SignedIn{}, &ProviderError{Code: re.ErrorCode, Description: re.ErrorDescription}
		}
		return SignedIn{}, &ProviderError{Description: "code exchange: " + err.Error(), Unreachable: true}
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		return SignedIn{}, &ProviderError{Description: "the token response carries no id_token", Unreachable: true}
	}
	// 3. The ID token: for our client, with our nonce.
	id, idTok, err := f.providers.verify(ctx, s.OIDC, rawID, []string{s.OIDC.ClientID})
	if err != nil {
		return SignedIn{}, err
	}
	if subtle.ConstantTimeCompare([]byte(idTok.Nonce), []byte(st.Nonce)) != 1 {
		return SignedIn{}, fmt.Errorf("%w: %w", ErrUnauthenticated, ErrNonce)
	}
	var azp struct {
		Azp string `json:"azp"`
	}
	if err := idTok.Claims(&azp); err != nil {
		return SignedIn{}, fmt.Errorf("%w: %w: %v", ErrUnauthenticated, ErrMalformedToken, err)
	}
	if len(idTok.Audience) > 1 && azp.Azp != "" && azp.Azp != s.OIDC.ClientID {
		return SignedIn{}, fmt.Errorf("%w: %w: azp %q is not the client", ErrUnauthenticated, ErrWrongAudience, azp.Azp)
	}
	// 4. The allow rules.
	id.Method = MethodBrowserSession
	id, err = admit(s, id)
	if err != nil {
		return SignedIn{}, err
	}
	return SignedIn{Identity: id, ReturnTo: st.ReturnTo}, nil
}

func oauthConfig(s *Settings, p *provider, origin, secret string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     s.OIDC.ClientID,
		ClientSecret: secret,
		Endpoint:     p.oidc.Endpoint(),
		RedirectURL:  origin + CallbackPath,
		Scopes:       slices.Clone(scopes),
	}
}

// checkOrigin refuses an origin that is not scheme://host[:port].
func checkOrigin(origin string) error {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("access: origin must be scheme://host of the agent, got %q", origin)
	}
	return nil
}

// CheckReturnTo returns the return_to of a sign-in ("" is "/") or a *ReturnToError: it must be a
// path on the agent's host, starting with a single "/", with no "//", no backslash, no scheme or
// host, and no control characters, so the redirect after the sign-in cannot leave the host.
func CheckReturnTo(returnTo string) (string, error) {
	bad := func(reason string) (string, error) { return "", &ReturnToError{Value: returnTo, Reason: reason} }
	switch {
	case returnTo == "":
		return "/", nil
	case len(returnTo) > 2048:
		return bad("longer than 2048 characters")
	case !strings.HasPrefix(returnTo, "/"):
		return bad(`must be a path starting with "/"`)
	case strings.Contains(returnTo, "//"):
		return bad(`must not contain "//"`)
	case strings.Contains(returnTo, `\`):
		return bad("must not contain a backslash")
	case strings.ContainsFunc(returnTo, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return bad("must not contain control characters")
	}
	u, err := url.Parse(returnTo)
	if err != nil {
		return bad("is not a URL path: " + err.Error())
	}
	if u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return bad("must not name a scheme or host")
	}
	return returnTo, nil
}

// seal encrypts st into a cookie value: base64url(nonce || ciphertext).
func (f *SignIn) seal(st flowState) (string, error) {
	plain, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("seal sign-in state: %w", err)
	}
	nonce := make([]byte, f.aead.NonceSize(), f.aead.NonceSize()+len(plain)+f.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal sign-in state: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(f.aead.Seal(nonce, nonce, plain, stateAD)), nil
}

// open decrypts and checks a state cookie's value.
func (f *SignIn) open(cookie string) (flowState, error) {
	if cookie == "" {
		return flowState{}, fmt.Errorf("%w: no state cookie: start at /auth/login", ErrState)
	}
	sealed, err := base64.RawURLEncoding.DecodeString(cookie)
	if err != nil || len(sealed) < f.aead.NonceSize() {
		return flowState{}, fmt.Errorf("%w: the state cookie is garbled", ErrState)
	}
	n := f.aead.NonceSize()
	plain, err := f.aead.Open(nil, sealed[:n], sealed[n:], stateAD)
	if err != nil {
		return flowState{}, fmt.Errorf("%w: the state cookie was not sealed by this platform", ErrState)
	}
	var st flowState
	if err := json.Unmarshal(plain, &st); err != nil {
		return flowState{}, fmt.Errorf("%w: the state cookie is garbled", ErrState)
	}
	if !f.now().Before(time.Unix(st.Expires, 0)) {
		return flowState{}, fmt.Errorf("%w: the sign-in took longer than %s: start again", ErrState, StateTTL)
	}
	return st, nil
}

// randomString is 32 random bytes, base64url.
func randomString() string {
	return base64.RawURLEncoding.EncodeToString(randomBytes())
}

func randomBytes() []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms (Go 1.24+)
	}
	return b
}
