// Package oidctest is an OpenID provider for tests, served by httptest on 127.0.0.1 and speaking
// the real protocol: discovery, a JWKS of RS256 keys that Rotate changes, the authorization
// endpoint (authorization code with PKCE S256) and the token endpoint. A test chooses who signs
// in next with SignInAs and mints bearer tokens of any shape with Mint. The runtime's browser-flow
// tests drive it with a cookie jar; this package's tests drive it directly.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Defaults of Options.
const (
	DefaultClientID     = "svc-test-client"
	DefaultClientSecret = "svc-test-secret"
)

// Options configure New; the zero value holds the defaults.
type Options struct {
	ClientID     string // default DefaultClientID
	ClientSecret string // default DefaultClientSecret; the token endpoint checks it
	// RedirectURI, when set, is the only redirect_uri the authorization endpoint accepts;
	// otherwise any http(s) URL is accepted (the agent's host is often known only later).
	RedirectURI string
	// TokenTTL is the lifetime of ID tokens and of tokens from Mint; default one hour.
	TokenTTL time.Duration
}

// Provider is a running OpenID provider. Its methods are safe for concurrent use.
type Provider struct {
	// Issuer is the provider's issuer URL (http://127.0.0.1:port).
	Issuer       string
	ClientID     string
	ClientSecret string

	redirectURI string
	ttl         time.Duration
	srv         *httptest.Server

	mu          sync.Mutex
	keys        []signingKey // published; the last one signs
	foreign     *signingKey  // never published
	user        map[string]any
	codes       map[string]grant
	editIDToken func(claims map[string]any)
	discoveries int
	jwksFetches int
}

type signingKey struct {
	kid    string
	priv   *rsa.PrivateKey
	signer jose.Signer
}

// grant is an issued authorization code.
type grant struct {
	redirectURI string
	challenge   string
	nonce       string
	user        map[string]any
}

// New starts a provider on 127.0.0.1, closed when t ends.
func New(t testing.TB, opts Options) *Provider {
	t.Helper()
	p := &Provider{
		ClientID:     cmpOr(opts.ClientID, DefaultClientID),
		ClientSecret: cmpOr(opts.ClientSecret, DefaultClientSecret),
		redirectURI:  opts.RedirectURI,
		ttl:          opts.TokenTTL,
		codes:        map[string]grant{},
	}
	if p.ttl <= 0 {
		p.ttl = time.Hour
	}
	p.keys = []signingKey{newKey(t)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.Issuer = p.srv.URL
	return p
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func newKey(t testing.TB) signingKey {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	kid := randomString()[:16]
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, priv: priv, signer: signer}
}

// SignInAs chooses the user the authorization endpoint signs in from now on: claims go into the
// ID token and must hold "sub". Before any call, /authorize answers error=access_denied.
func (p *Provider) SignInAs(claims map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = maps.Clone(claims)
}

// EditIDTokens makes the token endpoint pass each ID token's claims through edit before signing
// (a wrong nonce, another audience, an expiry in the past); nil stops it.
func (p *Provider) EditIDTokens(edit func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.editIDToken = edit
}

// Rotate adds a new signing key to the JWKS and signs with it from now on. The key it replaces
// stays published until the next Rotate retires it, as providers do.
func (p *Provider) Rotate(t testing.TB) {
	t.Helper()
	k := newKey(t)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys[len(p.keys)-1:], k)
}

// Mint signs a token with the current key. claims override the defaults: iss (the Issuer), aud
// (the ClientID), iat (now) and exp (now + TokenTTL); a time.Time value is written as Unix seconds.
func (p *Provider) Mint(t testing.TB, claims map[string]any) string {
	t.Helper()
	p.mu.Lock()
	k := p.keys[len(p.keys)-1]
	p.mu.Unlock()
	raw, err := p.sign(k, claims)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// MintForeign signs like Mint with a key the JWKS never publishes (under a fresh kid): its
// signature verifies with no key of this provider.
func (p *Provider) MintForeign(t testing.TB, claims map[string]any) string {
	t.Helper()
	p.mu.Lock()
	if p.foreign == nil {
		k := newKey(t)
		p.foreign = &k
	}
	k := *p.foreign
	p.mu.Unlock()
	raw, err := p.sign(k, claims)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// sign signs claims over the defaults with k.
func (p *Provider) sign(k signingKey, claims map[string]any) (string, error) {
	now := time.Now()
	all := map[string]any{"iss": p.Issuer, "aud": p.ClientID, "iat": now.Unix(), "exp": now.Add(p.ttl).Unix()}
	for name, v := range claims {
		if tm, ok := v.(time.Time); ok {
			v = tm.Unix()
		}
		all[name] = v
	}
	raw, err := jwt.Signed(k.signer).Claims(all).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return raw, nil
}

// DiscoveryFetches is how many times the discovery document was fetched.
func (p *Provider) DiscoveryFetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.discoveries
}

// JWKSFetches is how many times the key set was fetched.
func (p *Provider) JWKSFetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jwksFetches
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	p.discoveries++
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.Issuer,
		"authorization_endpoint":                p.Issuer + "/authorize",
		"token_endpoint":                        p.Issuer + "/token",
		"jwks_uri":                              p.Issuer + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "email", "profile"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	p.jwksFetches++
	var set jose.JSONWebKeySet
	for _, k := range p.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.kid, Algorithm: string(jose.RS256), Use: "sig"})
	}
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, set)
}

// authorize signs in the chosen user at once and sends the browser back with a code.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case q.Get("client_id") != p.ClientID:
		http.Error(w, fmt.Sprintf("unknown client_id %q", q.Get("client_id")), http.StatusBadRequest)
		return
	case err != nil || (redirect.Scheme != "http" && redirect.Scheme != "https") || redirect.Host == "":
		http.Error(w, fmt.Sprintf("redirect_uri %q is not an http(s) URL", q.Get("redirect_uri")), http.StatusBadRequest)
		return
	case p.redirectURI != "" && q.Get("redirect_uri") != p.redirectURI:
		http.Error(w, fmt.Sprintf("redirect_uri %q is not registered", q.Get("redirect_uri")), http.StatusBadRequest)
		return
	case q.Get("response_type") != "code":
		http.Error(w, "response_type must be code", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE with code_challenge_method=S256 is required", http.StatusBadRequest)
		return
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		http.Error(w, "scope must include openid", http.StatusBadRequest)
		return
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	p.mu.Lock()
	user := p.user
	if user == nil {
		back.Set("error", "access_denied")
		back.Set("error_description", "no user signed in")
	} else {
		code := randomString()
		p.codes[code] = grant{redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), user: user}
		back.Set("code", code)
	}
	p.mu.Unlock()
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token exchanges a code for an ID token and an access token.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(p.ClientSecret)) != 1 {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only authorization_code")
		return
	}
	p.mu.Lock()
	code := r.PostForm.Get("code")
	g, ok := p.codes[code]
	delete(p.codes, code) // a code is used once, even in a failed exchange
	edit := p.editIDToken
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case !ok:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or used code")
		return
	case r.PostForm.Get("redirect_uri") != g.redirectURI:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization's")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge")
		return
	}
	claims := maps.Clone(g.user)
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	if edit != nil {
		edit(claims)
	}
	p.mu.Lock()
	k := p.keys[len(p.keys)-1]
	p.mu.Unlock()
	idToken, err := p.sign(k, claims)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": randomString(), "token_type": "Bearer", "expires_in": int(p.ttl.Seconds()), "id_token": idToken,
	})
}

func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the client went away; nothing to tell it
	}
}

func randomString() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
