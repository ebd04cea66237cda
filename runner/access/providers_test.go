package access_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/access"
	"svc/runner/access/oidctest"
)

func TestVerifyBearerMapsClaims(t *testing.T) {
	f := newFixture(t)
	raw := f.idp.Mint(t, map[string]any{
		"sub": "12345", "email": "ada@example.com", "email_verified": true,
		"org": 9, "groups": []string{"eng", "agents"}, "scope_id": "s1",
	})
	got, err := f.providers.VerifyBearer(context.Background(), f.settings, raw)
	if err != nil {
		t.Fatal(err)
	}
	want := access.Identity{
		UserID: "12345", Email: "ada@example.com", EmailVerified: true, OrgID: "9",
		Groups: []string{"eng", "agents"}, Scope: "s1", Method: access.MethodOIDCToken,
	}
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".ExpiresAt" }, cmp.Ignore())); diff != "" {
		t.Errorf("VerifyBearer (-want +got):\n%s", diff)
	}
	if got.ExpiresAt.IsZero() {
		t.Error("ExpiresAt is zero, want the token's exp")
	}
}

func TestVerifyBearerRefusals(t *testing.T) {
	f := newFixture(t)
	other := oidctest.New(t, oidctest.Options{ClientID: f.idp.ClientID})
	user := map[string]any{"sub": "u1", "email": "ada@example.com"}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range user {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"expired", f.idp.Mint(t, with(map[string]any{"exp": time.Now().Add(-time.Minute)})), access.ErrTokenExpired},
		{"foreign audience", f.idp.Mint(t, with(map[string]any{"aud": "another-client"})), access.ErrWrongAudience},
		{"key the provider never published", f.idp.MintForeign(t, user), access.ErrBadSignature},
		{"another issuer", other.Mint(t, user), access.ErrUnknownIssuer},
		{"another issuer's key under our iss", other.Mint(t, with(map[string]any{"iss": f.idp.Issuer})), access.ErrBadSignature},
		{"no user claim", f.idp.Mint(t, map[string]any{"email": "ada@example.com"}), access.ErrMissingClaim},
		{"not a JWT", "ak_abc", access.ErrMalformedToken},
		{"unverified e-mail of an admitted domain", f.idp.Mint(t, with(map[string]any{"email_verified": false})), access.ErrAccessDenied},
		{"user no rule admits", f.idp.Mint(t, with(map[string]any{"email": "eve@evil.com"})), access.ErrAccessDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := f.providers.VerifyBearer(context.Background(), f.settings, tt.token)
			if !errors.Is(err, tt.want) {
				t.Fatalf("VerifyBearer = %+v, %v; want %v", id, err, tt.want)
			}
			if !errors.Is(tt.want, access.ErrAccessDenied) && !errors.Is(err, access.ErrUnauthenticated) {
				t.Errorf("VerifyBearer = %v, want it to match ErrUnauthenticated (401) too", err)
			}
		})
	}
}

func TestVerifyBearerAudiences(t *testing.T) {
	f := newFixture(t)
	s := *f.settings
	o := *s.OIDC
	o.Audiences = []string{"api://agent", "second"}
	s.OIDC = &o
	ok := f.idp.Mint(t, map[string]any{"sub": "u1", "aud": []string{"x", "second"}, "groups": "agents"})
	if _, err := f.providers.VerifyBearer(context.Background(), &s, ok); err != nil {
		t.Errorf("a token for a listed audience: %v", err)
	}
	clientOnly := f.idp.Mint(t, map[string]any{"sub": "u1", "groups": "agents"})
	if _, err := f.providers.VerifyBearer(context.Background(), &s, clientOnly); !errors.Is(err, access.ErrWrongAudience) {
		t.Errorf("a token for the client id when audiences are set: %v, want ErrWrongAudience", err)
	}
}

func TestDiscoveryIsFetchedOnce(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		raw := f.idp.Mint(t, map[string]any{"sub": "u1", "groups": []string{"agents"}, "n": i})
		if _, err := f.providers.VerifyBearer(context.Background(), f.settings, raw); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.signIn.Login(context.Background(), f.settings, origin, "/"); err != nil {
		t.Fatal(err)
	}
	if got := f.idp.DiscoveryFetches(); got != 1 {
		t.Errorf("discovery fetched %d times, want 1", got)
	}
	if got := f.idp.JWKSFetches(); got != 1 {
		t.Errorf("JWKS fetched %d times, want 1", got)
	}
}

func TestKeyRotationWithoutRestart(t *testing.T) {
	f := newFixture(t)
	verify := func(name string) {
		t.Helper()
		raw := f.idp.Mint(t, map[string]any{"sub": "u1", "groups": []string{"agents"}, "name": name})
		if _, err := f.providers.VerifyBearer(context.Background(), f.settings, raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	verify("before the rotation")
	f.idp.Rotate(t)
	verify("signed with the new key")
	if f.idp.JWKSFetches() != 2 {
		t.Errorf("JWKS fetched %d times, want 2 (once more for the new key)", f.idp.JWKSFetches())
	}
	f.idp.Rotate(t)
	verify("after a second rotation")
}

func TestVerifiedTokensExpire(t *testing.T) {
	f := newFixture(t)
	raw := f.idp.Mint(t, map[string]any{"sub": "u1", "groups": []string{"agents"}})
	if _, err := f.providers.VerifyBearer(context.Background(), f.settings, raw); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Hour) // past the token's hour
	if _, err := f.providers.VerifyBearer(context.Background(), f.settings, raw); !errors.Is(err, access.ErrTokenExpired) {
		t.Errorf("a remembered token past its expiry: %v, want ErrTokenExpired", err)
	}
}

func TestAllowAppliesToRememberedTokens(t *testing.T) {
	f := newFixture(t)
	raw := f.idp.Mint(t, map[string]any{"sub": "u1", "groups": []string{"agents"}})
	if _, err := f.providers.VerifyBearer(context.Background(), f.settings, raw); err != nil {
		t.Fatal(err)
	}
	s := *f.settings
	s.Allow = access.AllowRules{Groups: []string{"admins"}}
	if _, err := f.providers.VerifyBearer(context.Background(), &s, raw); !errors.Is(err, access.ErrAccessDenied) {
		t.Errorf("a user removed from allow: %v, want ErrAccessDenied", err)
	}
}

func TestUnreachableProvider(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	f := newFixture(t)
	s := *f.settings
	o := *s.OIDC
	o.Issuer = down.URL
	s.OIDC = &o
	other := oidctest.New(t, oidctest.Options{})
	raw := other.Mint(t, map[string]any{"sub": "u1", "iss": down.URL})
	_, err := f.providers.VerifyBearer(context.Background(), &s, raw)
	var pe *access.ProviderError
	if !errors.As(err, &pe) || !pe.Unreachable {
		t.Errorf("VerifyBearer with a provider down = %v, want an unreachable *ProviderError", err)
	}
}
