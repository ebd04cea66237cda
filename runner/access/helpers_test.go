package access_test

import (
	"sync"
	"testing"
	"time"

	"svc/runner/access"
	"svc/runner/access/oidctest"
)

// clock is a settable clock, so no test waits on real time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a provider on 127.0.0.1 and the access side configured for it.
type fixture struct {
	idp       *oidctest.Provider
	settings  *access.Settings
	providers *access.Providers
	signIn    *access.SignIn
	clock     *clock
}

const origin = "http://agent.test:8080"

func newFixture(t testing.TB) *fixture {
	t.Helper()
	idp := oidctest.New(t, oidctest.Options{RedirectURI: origin + access.CallbackPath})
	settings, err := access.ParseSettings([]byte(`{
		"oidc": {"issuer": "` + idp.Issuer + `", "clientId": "` + idp.ClientID + `", "clientSecret": "env:OIDC_SECRET",
		         "orgClaim": "org", "groupsClaim": "groups"},
		"allow": {"domains": ["example.com"], "groups": ["agents"], "orgs": ["org-admitted"]},
		"collaborators": ["guest@elsewhere.org"]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	providers := access.NewProviders(access.ProvidersParams{Now: c.Now})
	signIn, err := access.NewSignIn(providers, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{idp: idp, settings: settings, providers: providers, signIn: signIn, clock: c}
}
