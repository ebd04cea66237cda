package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"svc/registry"
	"svc/runner/access"
	"svc/runner/runtime"
)

// signInKeyLabel is what the sign-in's state key is derived under from SVC_SIGNING_KEY: every
// runner holding the signing key derives the same key, and the runtime-token key is never used
// for anything else.
const signInKeyLabel = "svc access sign-in state key v1"

// signInKey is the 32-byte key sealing the sign-in's state cookie: HMAC-SHA256 of the fixed
// label under the platform's signing key (SVC_SIGNING_KEY).
func signInKey(signingKey []byte) []byte {
	mac := hmac.New(sha256.New, signingKey)
	mac.Write([]byte(signInKeyLabel))
	return mac.Sum(nil)
}

// accessSettings is registry.Access as an access.SettingsSource: an agent without settings is
// (nil, nil).
type accessSettings struct {
	store *registry.Access
}

var _ access.SettingsSource = accessSettings{}

// LoadAccessSettings implements access.SettingsSource.
func (a accessSettings) LoadAccessSettings(ctx context.Context, agentID string) ([]byte, error) {
	doc, _, err := a.store.Get(ctx, agentID)
	if errors.Is(err, registry.ErrNoAccessSettings) {
		return nil, nil
	}
	return doc, err
}

// newAccess builds the sign-in of the process's runtimes (CONTRACT §8): one Providers, one
// SessionCache over the platform's browser sessions (its TTL, access.DefaultSessionCacheTTL,
// bounds how late a logout on another runner is seen here) and one SignIn keyed from the
// signing key.
func (p *platform) newAccess(signingKey []byte) (*runtime.Access, error) {
	providers := access.NewProviders(access.ProvidersParams{})
	signIn, err := access.NewSignIn(providers, signInKey(signingKey))
	if err != nil {
		return nil, fmt.Errorf("sign-in: %w", err)
	}
	return &runtime.Access{
		Settings:      access.NewSettingsCache(accessSettings{store: p.stores.Access}, 0, nil),
		Providers:     providers,
		Sessions:      access.NewSessionCache(browserSessions{store: registry.NewBrowserSessions(p.db)}, access.SessionCacheParams{}),
		SignIn:        signIn,
		SecureCookies: strings.HasPrefix(strings.ToLower(p.cfg.PublicURL), "https://"),
	}, nil
}
