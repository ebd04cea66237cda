package access_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"svc/runner/access"
	"svc/runner/access/memsessions"
)

var ada = access.Identity{UserID: "u-ada", Email: "ada@example.com", EmailVerified: true, OrgID: "org-1", Groups: []string{"eng"}, Method: access.MethodBrowserSession}

func TestSessionCacheHitsSpareTheStore(t *testing.T) {
	ctx := context.Background()
	store := memsessions.New()
	c := newClock()
	cache := access.NewSessionCache(store, access.SessionCacheParams{Now: c.Now})
	cookie, s, err := cache.Create(ctx, "agt_1", ada)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID == cookie || s.ID != access.SessionID(cookie) || len(cookie) != 43 {
		t.Errorf("session id %q for cookie %q: want the cookie's hash, and a 32-byte cookie", s.ID, cookie)
	}
	for range 3 {
		id, err := cache.Identity(ctx, "agt_1", cookie)
		if err != nil {
			t.Fatal(err)
		}
		if id.UserID != "u-ada" || id.Method != access.MethodBrowserSession || id.CredentialID != s.ID || !id.ExpiresAt.Equal(s.ExpiresAt) {
			t.Errorf("Identity = %+v", id)
		}
	}
	if got := store.Reads(); got != 0 {
		t.Errorf("store read %d times within the TTL, want 0", got)
	}
	c.Advance(access.DefaultSessionCacheTTL)
	if _, err := cache.Identity(ctx, "agt_1", cookie); err != nil {
		t.Fatal(err)
	}
	if got := store.Reads(); got != 1 {
		t.Errorf("store read %d times once the TTL passed, want 1", got)
	}
}

func TestLogoutEndsTheSessionOnEveryRunner(t *testing.T) {
	ctx := context.Background()
	store := memsessions.New() // shared by both runners, as the database is
	c := newClock()
	runnerA := access.NewSessionCache(store, access.SessionCacheParams{Now: c.Now})
	runnerB := access.NewSessionCache(store, access.SessionCacheParams{Now: c.Now})
	cookie, _, err := runnerA.Create(ctx, "agt_1", ada)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runnerB.Identity(ctx, "agt_1", cookie); err != nil {
		t.Fatal(err)
	}
	if err := runnerA.End(ctx, cookie); err != nil {
		t.Fatal(err)
	}
	if _, err := runnerA.Identity(ctx, "agt_1", cookie); !errors.Is(err, access.ErrNoSession) {
		t.Errorf("on the runner that ended it: %v, want ErrNoSession at once", err)
	}
	c.Advance(access.DefaultSessionCacheTTL)
	if access.DefaultSessionCacheTTL >= 5*time.Second {
		t.Errorf("DefaultSessionCacheTTL = %v: a logout must reach every runner within 5 s", access.DefaultSessionCacheTTL)
	}
	if _, err := runnerB.Identity(ctx, "agt_1", cookie); !errors.Is(err, access.ErrNoSession) || !errors.Is(err, access.ErrUnauthenticated) {
		t.Errorf("on another runner once its TTL passed: %v, want ErrNoSession", err)
	}
	reads := store.Reads()
	if _, err := runnerB.Identity(ctx, "agt_1", cookie); !errors.Is(err, access.ErrNoSession) {
		t.Fatal(err)
	}
	if store.Reads() != reads {
		t.Error("an ended session was read again; want it refused from the cache")
	}
	if err := runnerB.End(ctx, cookie); err != nil {
		t.Errorf("a second logout: %v, want nil", err)
	}
}

func TestSessionRefusals(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	cache := access.NewSessionCache(memsessions.New(), access.SessionCacheParams{Now: c.Now})
	cookie, _, err := cache.Create(ctx, "agt_1", ada)
	if err != nil {
		t.Fatal(err)
	}
	unknown, _ := access.NewSessionCookie()
	for name, check := range map[string]func() error{
		"no cookie":       func() error { _, err := cache.Identity(ctx, "agt_1", ""); return err },
		"unknown cookie":  func() error { _, err := cache.Identity(ctx, "agt_1", unknown); return err },
		"another agent's": func() error { _, err := cache.Identity(ctx, "agt_2", cookie); return err },
		"the id, not the cookie": func() error {
			_, err := cache.Identity(ctx, "agt_1", access.SessionID(cookie))
			return err
		},
	} {
		if err := check(); !errors.Is(err, access.ErrNoSession) {
			t.Errorf("%s: %v, want ErrNoSession", name, err)
		}
	}
	c.Advance(access.SessionTTL)
	if _, err := cache.Identity(ctx, "agt_1", cookie); !errors.Is(err, access.ErrNoSession) {
		t.Errorf("after 12 h: %v, want ErrNoSession", err)
	}
}

// TestEndWinsOverAConcurrentRead: a read that started before a logout does not bring the
// session back on the runner that ended it (run with -race).
func TestEndWinsOverAConcurrentRead(t *testing.T) {
	ctx := context.Background()
	store := memsessions.New()
	c := newClock()
	creator := access.NewSessionCache(store, access.SessionCacheParams{Now: c.Now})
	cookie, _, err := creator.Create(ctx, "agt_1", ada)
	if err != nil {
		t.Fatal(err)
	}
	cache := access.NewSessionCache(store, access.SessionCacheParams{Now: c.Now})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := cache.Identity(ctx, "agt_1", cookie)
			if err != nil && !errors.Is(err, access.ErrNoSession) {
				t.Error(err)
			}
		})
	}
	if err := cache.End(ctx, cookie); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := cache.Identity(ctx, "agt_1", cookie); !errors.Is(err, access.ErrNoSession) {
		t.Errorf("after End and concurrent reads: %v, want ErrNoSession", err)
	}
}

func TestSessionFromSignIn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.idp.SignInAs(map[string]any{"sub": "u-ada", "email": "ada@example.com", "scope_id": "s1"})
	login, err := f.signIn.Login(ctx, f.settings, origin, "/")
	if err != nil {
		t.Fatal(err)
	}
	in, err := f.signIn.Callback(ctx, f.settings, origin, authorize(t, login.URL), login.StateCookie, secret)
	if err != nil {
		t.Fatal(err)
	}
	cache := access.NewSessionCache(memsessions.New(), access.SessionCacheParams{})
	cookie, _, err := cache.Create(ctx, "agt_1", in.Identity)
	if err != nil {
		t.Fatal(err)
	}
	id, err := cache.Identity(ctx, "agt_1", cookie)
	if err != nil {
		t.Fatal(err)
	}
	if id.UserID != "u-ada" || id.Scope != "s1" || id.Email != "ada@example.com" || !f.settings.Admits(id.User()) {
		t.Errorf("Identity = %+v", id)
	}
}
