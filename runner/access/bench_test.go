package access_test

import (
	"context"
	"testing"
	"time"

	"svc/auth"
	"svc/runner/access"
	"svc/runner/access/memsessions"
)

// BenchmarkCredentialCheck measures the check of each credential kind a request pays, beside
// today's runtime-token check (auth.Signer.Verify), in one run: issue 26 allows each kind at most
// 20 µs at p50 over the runtime token.
func BenchmarkCredentialCheck(b *testing.B) {
	ctx := context.Background()

	b.Run("runtime_token", func(b *testing.B) {
		signer, err := auth.NewSigner(make([]byte, 32))
		if err != nil {
			b.Fatal(err)
		}
		token, err := signer.Mint(auth.RuntimeClaims{UserID: "u-ada", AgentID: "agt_1", ScopeID: "s1", ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := signer.Verify(token); err != nil {
				b.Fatal(err)
			}
		}
	})

	f := newFixture(b)
	token := f.idp.Mint(b, map[string]any{"sub": "u-ada", "email": "ada@example.com", "groups": []string{"agents"}})

	b.Run("oidc_token_remembered", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.providers.VerifyBearer(ctx, f.settings, token); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("oidc_token_first_use", func(b *testing.B) {
		// Every call checks the RSA signature: the cost of a token's first request (keys cached).
		providers := access.NewProviders(access.ProvidersParams{VerifiedTokens: -1})
		for b.Loop() {
			if _, err := providers.VerifyBearer(ctx, f.settings, token); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("browser_session_cached", func(b *testing.B) {
		cache := access.NewSessionCache(memsessions.New(), access.SessionCacheParams{})
		cookie, _, err := cache.Create(ctx, "agt_1", ada)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := cache.Identity(ctx, "agt_1", cookie); err != nil {
				b.Fatal(err)
			}
		}
	})
}
