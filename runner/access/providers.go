package access

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// signingAlgs are the algorithms a provider's tokens may use (asymmetric only: an HS256 value is
// a runtime token, never an identity-provider token).
var signingAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512, jose.EdDSA}

// ProvidersParams configure NewProviders; the zero value holds the documented defaults.
type ProvidersParams struct {
	// HTTPClient fetches discovery documents and key sets and exchanges codes; default: a client
	// with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock that checks expiries; default time.Now.
	Now func() time.Time
	// RetryAfter is how long a failed discovery is remembered before it is tried again, so an
	// unreachable provider is not asked on every request; default 5 s.
	RetryAfter time.Duration
	// VerifiedTokens is how many verified bearer tokens are remembered (until their expiry), so a
	// client that sends the same token on every request pays the signature check once; default
	// 10,000; negative: none.
	VerifiedTokens int
}

// Providers are the OpenID providers of every agent, cached by issuer: discovery is fetched once
// per issuer (a failure is retried after RetryAfter), and the signing keys through go-oidc's
// remote key set, which fetches the JWKS again when a token names a key it does not hold, so a
// key rotation at the provider needs no restart. Safe for concurrent use.
type Providers struct {
	client     *http.Client
	now        func() time.Time
	retryAfter time.Duration

	mu       sync.Mutex
	byIssuer map[string]*provider
	flight   singleflight.Group
	tokens   *lru.Cache[[32]byte, verifiedToken] // nil when disabled
}

// provider is one discovered issuer, or the failure to discover it.
type provider struct {
	oidc     *oidc.Provider
	verifier *oidc.IDTokenVerifier // audience checked by us, against a list
	err      error
	failedAt time.Time
}

// verifiedToken is a bearer token already verified, remembered until it expires.
type verifiedToken struct {
	id Identity
}

// NewProviders returns an empty provider cache.
func NewProviders(p ProvidersParams) *Providers {
	ps := &Providers{client: p.HTTPClient, now: p.Now, retryAfter: p.RetryAfter, byIssuer: map[string]*provider{}}
	if ps.client == nil {
		ps.client = &http.Client{Timeout: 10 * time.Second}
	}
	if ps.now == nil {
		ps.now = time.Now
	}
	if ps.retryAfter <= 0 {
		ps.retryAfter = 5 * time.Second
	}
	size := p.VerifiedTokens
	if size == 0 {
		size = 10_000
	}
	if size > 0 {
		tokens, err := lru.New[[32]byte, verifiedToken](size)
		if err != nil {
			panic(err) // only for a size <= 0, excluded above
		}
		ps.tokens = tokens
	}
	return ps
}

// provider returns the discovered provider of issuer, fetching discovery once.
func (ps *Providers) provider(ctx context.Context, issuer string) (*provider, error) {
	ps.mu.Lock()
	p, ok := ps.byIssuer[issuer]
	ps.mu.Unlock()
	if ok && (p.err == nil || ps.now().Sub(p.failedAt) < ps.retryAfter) {
		return p, p.err
	}
	v, _, _ := ps.flight.Do(issuer, func() (any, error) {
		// The discovery outlives a caller that gives up: other callers wait for it too.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		op, err := oidc.NewProvider(oidc.ClientContext(dctx, ps.client), issuer)
		p := &provider{oidc: op}
		if err != nil {
			p.err = &ProviderError{Description: fmt.Sprintf("discovery of %s: %v", issuer, err), Unreachable: true}
			p.failedAt = ps.now()
		} else {
			p.verifier = op.Verifier(&oidc.Config{SkipClientIDCheck: true, Now: ps.now})
		}
		ps.mu.Lock()
		ps.byIssuer[issuer] = p
		ps.mu.Unlock()
		return p, nil
	})
	p = v.(*provider)
	return p, p.err
}

// VerifyBearer checks an identity-provider bearer token against the agent's settings: issued by
// the configured issuer, signed by one of its keys, not expired, with an aud among the audiences
// (default: the client id), naming a user in the user claim, and admitted by the allow rules.
// It returns an Identity with Method MethodOIDCToken and the scope_id claim as Scope.
//
// A refusal wraps ErrUnauthenticated and one of ErrMalformedToken, ErrUnknownIssuer,
// ErrBadSignature, ErrWrongAudience, ErrMissingClaim or ErrTokenExpired (an *ExpiredError), all
// 401; or it is ErrAccessDenied (403) for a genuine token of a user the allow rules do not admit;
// or a *ProviderError when the provider's discovery cannot be fetched.
func (ps *Providers) VerifyBearer(ctx context.Context, s *Settings, raw string) (Identity, error) {
	if s == nil || s.OIDC == nil {
		return Identity{}, fmt.Errorf("%w: %w: the agent has no identity provider", ErrUnauthenticated, ErrUnknownIssuer)
	}
	o := s.OIDC
	key := tokenKey(o, raw)
	if ps.tokens != nil {
		if v, ok := ps.tokens.Get(key); ok && ps.now().Before(v.id.ExpiresAt) {
			return admit(s, v.id)
		}
	}
	id, _, err := ps.verify(ctx, o, raw, o.audiences())
	if err != nil {
		return Identity{}, err
	}
	id.Method = MethodOIDCToken
	if ps.tokens != nil {
		ps.tokens.Add(key, verifiedToken{id: id})
	}
	return admit(s, id)
}

// admit applies the allow rules to a verified identity.
func admit(s *Settings, id Identity) (Identity, error) {
	if !s.Admits(id.User()) {
		return Identity{}, fmt.Errorf("%w: user %q (e-mail %q)", ErrAccessDenied, id.UserID, id.Email)
	}
	id.Groups = slices.Clone(id.Groups)
	return id, nil
}

// tokenKey is the key of a verified token: the token under the settings that mapped it.
func tokenKey(o *OIDCSettings, raw string) [32]byte {
	h := sha256.New()
	for _, part := range []string{o.Issuer, strings.Join(o.audiences(), "\x01"), o.userClaim(), o.emailClaim(), o.OrgClaim, o.GroupsClaim, raw} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	var key [32]byte
	h.Sum(key[:0])
	return key
}

// verify checks raw's issuer, signature, expiry and audience and maps its claims; Method is left
// for the caller to set. The identity expires with the token, which is returned too.
func (ps *Providers) verify(ctx context.Context, o *OIDCSettings, raw string, audiences []string) (Identity, *oidc.IDToken, error) {
	// Read the issuer before verifying, so a token of another issuer does not make us fetch
	// our provider's keys again, and is reported as what it is.
	jws, err := jose.ParseSigned(raw, signingAlgs)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("%w: %w: %v", ErrUnauthenticated, ErrMalformedToken, err)
	}
	var peek struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &peek); err != nil {
		return Identity{}, nil, fmt.Errorf("%w: %w: claims: %v", ErrUnauthenticated, ErrMalformedToken, err)
	}
	if peek.Issuer != o.Issuer {
		return Identity{}, nil, fmt.Errorf("%w: %w: %q, want %q", ErrUnauthenticated, ErrUnknownIssuer, peek.Issuer, o.Issuer)
	}
	p, err := ps.provider(ctx, o.Issuer)
	if err != nil {
		return Identity{}, nil, err
	}
	tok, err := p.verifier.Verify(ctx, raw)
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return Identity{}, nil, &ExpiredError{At: expired.Expiry}
	case err != nil && strings.HasPrefix(err.Error(), "failed to verify signature"):
		return Identity{}, nil, fmt.Errorf("%w: %w: %v", ErrUnauthenticated, ErrBadSignature, err)
	case err != nil:
		return Identity{}, nil, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if !slices.ContainsFunc(tok.Audience, func(a string) bool { return slices.Contains(audiences, a) }) {
		return Identity{}, nil, fmt.Errorf("%w: %w: aud %q, want one of %q", ErrUnauthenticated, ErrWrongAudience, tok.Audience, audiences)
	}
	var claims map[string]json.RawMessage
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, nil, fmt.Errorf("%w: %w: claims: %v", ErrUnauthenticated, ErrMalformedToken, err)
	}
	id, err := mapClaims(o, claims)
	if err != nil {
		return Identity{}, nil, err
	}
	id.ExpiresAt = tok.Expiry
	return id, tok, nil
}

// mapClaims reads the user, e-mail, organization, groups and scope of a verified token.
func mapClaims(o *OIDCSettings, claims map[string]json.RawMessage) (Identity, error) {
	id := Identity{
		UserID:        claimString(claims[o.userClaim()]),
		Email:         claimString(claims[o.emailClaim()]),
		EmailVerified: true,
		Scope:         claimString(claims["scope_id"]),
	}
	if id.UserID == "" {
		return Identity{}, fmt.Errorf("%w: %w: claim %q is missing or empty", ErrUnauthenticated, ErrMissingClaim, o.userClaim())
	}
	if raw, ok := claims["email_verified"]; ok {
		id.EmailVerified = claimString(raw) == "true"
	}
	if o.OrgClaim != "" {
		id.OrgID = claimString(claims[o.OrgClaim])
	}
	if o.GroupsClaim != "" {
		id.Groups = claimStrings(claims[o.GroupsClaim])
	}
	return id, nil
}

// claimString is a string claim, or the text of a number or boolean claim; "" otherwise.
func claimString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return strconv.FormatBool(b)
	}
	return ""
}

// claimStrings is a list claim's strings (a single string is a list of one).
func claimStrings(raw json.RawMessage) []string {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		if s := claimString(raw); s != "" {
			return []string{s}
		}
		return nil
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		if s := claimString(item); s != "" {
			out = append(out, s)
		}
	}
	return out
}
