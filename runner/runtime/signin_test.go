package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/runner/access"
	"svc/runner/access/memsessions"
	"svc/runner/access/oidctest"
	"svc/runner/runtime"
)

// memSettings is an access.SettingsSource in memory: the registry's role in these tests.
type memSettings struct {
	mu  sync.Mutex
	doc map[string][]byte
}

func (m *memSettings) LoadAccessSettings(_ context.Context, agentID string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.doc[agentID], nil
}

// signinEnv is a runtime with the sign-in of CONTRACT §8 in front of an oidctest provider.
type signinEnv struct {
	*env
	idp      *oidctest.Provider
	sessions *access.SessionCache
}

const signinAgent = "agt_signin"

func startSignin(t *testing.T) *signinEnv {
	t.Helper()
	return startSigninOn(t, oidctest.New(t, oidctest.Options{}), memsessions.New(), nil)
}

// startSigninOn starts a runtime signing in with idp and keeping its browser sessions in store
// (shared by the runtimes of one test as by the runners of a platform), its session cache on the
// clock now (nil: time.Now).
func startSigninOn(t testing.TB, idp *oidctest.Provider, store access.Sessions, now func() time.Time) *signinEnv {
	t.Helper()
	opts := signinOptions(t, idp, store, now)
	return &signinEnv{env: start(t, opts), idp: idp, sessions: opts.Access.Sessions}
}

// signinOptions are the runtime options of startSigninOn, for a caller that adds to them.
func signinOptions(t testing.TB, idp *oidctest.Provider, store access.Sessions, now func() time.Time) runtime.Options {
	t.Helper()
	doc, err := json.Marshal(map[string]any{
		"oidc":  map[string]any{"issuer": idp.Issuer, "clientId": idp.ClientID, "clientSecret": "env:IDP_SECRET", "orgClaim": "org"},
		"allow": map[string]any{"domains": []string{"example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	providers := access.NewProviders(access.ProvidersParams{})
	signIn, err := access.NewSignIn(providers, bytes.Repeat([]byte("s"), 32))
	if err != nil {
		t.Fatal(err)
	}
	sessions := access.NewSessionCache(store, access.SessionCacheParams{Now: now})
	sg := newSigner(t)
	return runtime.Options{
		Agent: loadAgent(t, "support-desk"), AgentID: signinAgent, DeployID: "dep_1", Verifier: sg.s,
		Env: func(name string) (string, bool) {
			if name == "IDP_SECRET" {
				return idp.ClientSecret, true
			}
			return "", false
		},
		Access: &runtime.Access{
			Settings:  access.NewSettingsCache(&memSettings{doc: map[string][]byte{signinAgent: doc}}, 0, nil),
			Providers: providers, Sessions: sessions, SignIn: signIn,
		},
	}
}

// browser is a cookie jar that follows no redirect by itself, so each step can be checked.
type browser struct {
	t      testing.TB
	client *http.Client
}

func newBrowser(t testing.TB) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// send does one request and reads its whole answer.
func (b *browser) send(method, rawURL string, header map[string]string, body any) (*http.Response, []byte) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp, data
}

// toCallback runs /auth/login?return_to=returnTo and the provider's sign-in, and returns the
// callback URL the provider sends the browser to (not yet followed).
func (b *browser) toCallback(e *signinEnv, returnTo string) string {
	b.t.Helper()
	resp, body := b.send("GET", e.url+"/auth/login?return_to="+url.QueryEscape(returnTo), nil, nil)
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), e.idp.Issuer) {
		b.t.Fatalf("GET /auth/login = %d %s -> %q, want 302 to the provider", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	resp, body = b.send("GET", resp.Header.Get("Location"), nil, nil)
	cb := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(cb, e.url+"/auth/callback?") {
		b.t.Fatalf("provider authorize = %d %s -> %q, want 302 to the callback", resp.StatusCode, body, cb)
	}
	return cb
}

// sessionCookie is the svc_session value the response set, "" when none.
func sessionCookie(resp *http.Response) string {
	for _, c := range resp.Cookies() {
		if c.Name == access.SessionCookieName && c.MaxAge >= 0 {
			return c.Value
		}
	}
	return ""
}

// errCode is the code of a runtime error body, in either envelope.
func errCode(t *testing.T, body []byte) string {
	t.Helper()
	var flat struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &flat); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	var code string
	if json.Unmarshal(flat.Error, &code) == nil {
		return code
	}
	var nested struct{ Code string }
	if err := json.Unmarshal(flat.Error, &nested); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return nested.Code
}

var xhr = map[string]string{"X-Requested-With": "fetch"}

// TestBrowserSignInFlow: login -> callback -> chat with the cookie -> /auth/me -> logout ->
// the cookie is refused; the session cookie is HttpOnly, SameSite=Lax and host-only.
func TestBrowserSignInFlow(t *testing.T) {
	e := startSignin(t)
	e.idp.SignInAs(map[string]any{"sub": "u_ann", "email": "ann@example.com", "email_verified": true, "org": "acme"})
	b := newBrowser(t)

	resp, body := b.send("GET", b.toCallback(e, "/auth/me"), nil, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/auth/me" {
		t.Fatalf("GET /auth/callback = %d %s -> %q, want 302 to /auth/me", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == access.SessionCookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Domain != "" || cookie.Path != "/" || cookie.Secure {
		t.Fatalf("svc_session = %+v, want HttpOnly, SameSite=Lax, host-only, Path=/, not Secure on http", cookie)
	}

	// The page's fetch: same origin, the cookie, X-Requested-With.
	resp, body = b.send("POST", e.url+"/chat/sync", xhr, map[string]any{"message": "hello"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /chat/sync with the cookie = %d %s", resp.StatusCode, body)
	}
	resp, body = b.send("GET", e.url+"/auth/me", nil, nil)
	var me map[string]any
	if err := json.Unmarshal(body, &me); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /auth/me = %d %s", resp.StatusCode, body)
	}
	if me["user_id"] != "u_ann" || me["email"] != "ann@example.com" || me["org_id"] != "acme" || me["auth_method"] != "browser_session" || me["expires_at"] == nil {
		t.Errorf("GET /auth/me = %v", me)
	}

	resp, body = b.send("POST", e.url+"/auth/logout", xhr, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /auth/logout = %d %s", resp.StatusCode, body)
	}
	// The jar dropped the cookie; the old value is refused too.
	resp, _ = b.send("GET", e.url+"/auth/me", nil, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /auth/me after logout (no cookie) = %d, want 401", resp.StatusCode)
	}
	resp, body = b.send("GET", e.url+"/auth/me", map[string]string{"Cookie": access.SessionCookieName + "=" + cookie.Value}, nil)
	if resp.StatusCode != http.StatusUnauthorized || errCode(t, body) != "unauthenticated" {
		t.Errorf("GET /auth/me with the ended session's cookie = %d %s, want 401 unauthenticated", resp.StatusCode, body)
	}
}

// TestBrowserSignInRefusals: each refusal of the flow and of the cookie.
func TestBrowserSignInRefusals(t *testing.T) {
	e := startSignin(t)
	e.idp.SignInAs(map[string]any{"sub": "u_ann", "email": "ann@example.com", "email_verified": true})

	t.Run("wrong state", func(t *testing.T) {
		b := newBrowser(t)
		cb, err := url.Parse(b.toCallback(e, "/"))
		if err != nil {
			t.Fatal(err)
		}
		q := cb.Query()
		q.Set("state", "forged")
		cb.RawQuery = q.Encode()
		resp, body := b.send("GET", cb.String(), nil, nil)
		if resp.StatusCode != http.StatusBadRequest || errCode(t, body) != "invalid_request" || sessionCookie(resp) != "" {
			t.Errorf("callback with a forged state = %d %s, want 400 invalid_request and no cookie", resp.StatusCode, body)
		}
	})
	t.Run("no state cookie", func(t *testing.T) {
		b := newBrowser(t)
		cb := b.toCallback(e, "/")
		resp, body := newBrowser(t).send("GET", cb, nil, nil) // another browser: no state cookie
		if resp.StatusCode != http.StatusBadRequest || sessionCookie(resp) != "" {
			t.Errorf("callback without the state cookie = %d %s, want 400 and no cookie", resp.StatusCode, body)
		}
	})
	t.Run("wrong nonce", func(t *testing.T) {
		e.idp.EditIDTokens(func(c map[string]any) { c["nonce"] = "another" })
		defer e.idp.EditIDTokens(nil)
		b := newBrowser(t)
		resp, body := b.send("GET", b.toCallback(e, "/"), nil, nil)
		if resp.StatusCode != http.StatusUnauthorized || errCode(t, body) != "unauthenticated" || sessionCookie(resp) != "" {
			t.Errorf("callback with a wrong nonce = %d %s, want 401 and no cookie", resp.StatusCode, body)
		}
	})
	t.Run("user no rule admits", func(t *testing.T) {
		e.idp.SignInAs(map[string]any{"sub": "u_eve", "email": "eve@elsewhere.example", "email_verified": true})
		defer e.idp.SignInAs(map[string]any{"sub": "u_ann", "email": "ann@example.com", "email_verified": true})
		b := newBrowser(t)
		resp, body := b.send("GET", b.toCallback(e, "/"), nil, nil)
		if resp.StatusCode != http.StatusForbidden || errCode(t, body) != "ACCESS_DENIED" || sessionCookie(resp) != "" {
			t.Errorf("callback of a user no rule admits = %d %s, want 403 ACCESS_DENIED and no cookie", resp.StatusCode, body)
		}
	})
	t.Run("open redirect", func(t *testing.T) {
		for _, to := range []string{"//evil.example/x", "https://evil.example/", `/\evil.example`, "evil"} {
			resp, body := newBrowser(t).send("GET", e.url+"/auth/login?return_to="+url.QueryEscape(to), nil, nil)
			if resp.StatusCode != http.StatusBadRequest || errCode(t, body) != "invalid_request" || !strings.Contains(string(body), "return_to") {
				t.Errorf("login with return_to %q = %d %s, want 400 naming return_to", to, resp.StatusCode, body)
			}
		}
	})

	b := newBrowser(t)
	if resp, body := b.send("GET", b.toCallback(e, "/"), nil, nil); sessionCookie(resp) == "" {
		t.Fatalf("sign-in = %d %s: no cookie", resp.StatusCode, body)
	}
	t.Run("cross-origin POST", func(t *testing.T) {
		resp, body := b.send("POST", e.url+"/chat/sync", map[string]string{"Origin": "https://evil.example"}, map[string]any{"message": "hi"})
		if resp.StatusCode != http.StatusForbidden || errCode(t, body) != "CSRF_REJECTED" {
			t.Errorf("cross-origin POST with the cookie = %d %s, want 403 CSRF_REJECTED", resp.StatusCode, body)
		}
		resp, body = b.send("POST", e.url+"/chat/sync", map[string]string{"Origin": e.url}, map[string]any{"message": "hi"})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("same-origin POST with the cookie = %d %s, want 200", resp.StatusCode, body)
		}
	})
	t.Run("scope of a session without scope claim", func(t *testing.T) {
		resp, body := b.send("POST", e.url+"/chat/sync", xhr, map[string]any{"message": "hi", "scope_id": "team-b"})
		if resp.StatusCode != http.StatusForbidden || errCode(t, body) != "scope_forbidden" {
			t.Errorf("chat with another scope_id = %d %s, want 403 scope_forbidden", resp.StatusCode, body)
		}
		resp, body = b.send("POST", e.url+"/chat/sync", xhr, map[string]any{"message": "hi", "scope_id": "u_ann"})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("chat with its own user id as scope_id = %d %s, want 200", resp.StatusCode, body)
		}
	})
}

// TestIdentityProviderBearer: a bearer JWT of the agent's provider is oidc_token; an expired or
// foreign-audience one is 401; runtime tokens still work beside it.
func TestIdentityProviderBearer(t *testing.T) {
	e := startSignin(t)
	tok := e.idp.Mint(t, map[string]any{"sub": "u_bob", "email": "bob@example.com", "email_verified": true})
	r := e.do("GET", "/auth/me", tok, nil)
	if r.Status != http.StatusOK || r.JSON["auth_method"] != "oidc_token" || r.JSON["user_id"] != "u_bob" {
		t.Fatalf("GET /auth/me with an IdP token = %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/chat/sync", tok, map[string]any{"message": "hello"}); r.Status != http.StatusOK {
		t.Errorf("chat with an IdP token = %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/chat/sync", tok, map[string]any{"message": "hello", "scope_id": "team-b"}); r.Status != http.StatusForbidden || str(r.JSON["error"]) != "scope_forbidden" {
		t.Errorf("IdP token with another scope_id = %d %s, want 403 scope_forbidden", r.Status, r.Body)
	}
	for name, claims := range map[string]map[string]any{
		"expired":          {"sub": "u_bob", "email": "bob@example.com", "email_verified": true, "exp": time.Now().Add(-time.Hour), "iat": time.Now().Add(-2 * time.Hour)},
		"foreign audience": {"sub": "u_bob", "email": "bob@example.com", "email_verified": true, "aud": "another-client"},
	} {
		r := e.do("POST", "/chat/sync", e.idp.Mint(t, claims), map[string]any{"message": "hello"})
		if r.Status != http.StatusUnauthorized || str(r.JSON["error"]) != "unauthenticated" {
			t.Errorf("%s IdP token = %d %s, want 401 unauthenticated", name, r.Status, r.Body)
		}
	}
	denied := e.idp.Mint(t, map[string]any{"sub": "u_eve", "email": "eve@elsewhere.example", "email_verified": true})
	if r := e.do("GET", "/auth/me", denied, nil); r.Status != http.StatusForbidden {
		t.Errorf("IdP token of a user no rule admits = %d %s, want 403", r.Status, r.Body)
	}
	rt := newSigner(t).token(signinAgent, "u_carl", "")
	if r := e.do("GET", "/auth/me", rt, nil); r.Status != http.StatusOK || r.JSON["auth_method"] != "runtime_token" {
		t.Errorf("GET /auth/me with a runtime token = %d %s", r.Status, r.Body)
	}
}

// TestLogoutEndsTheSessionOnEveryRunner: two runtimes share the browser sessions as two runners
// share the database; a logout on one is refused there at once, and on the other once its
// session cache's TTL has passed (its clock is moved, not waited for).
func TestLogoutEndsTheSessionOnEveryRunner(t *testing.T) {
	idp := oidctest.New(t, oidctest.Options{})
	idp.SignInAs(map[string]any{"sub": "u_ann", "email": "ann@example.com", "email_verified": true})
	store := memsessions.New()
	clk := &clock{now: time.Now()}
	a := startSigninOn(t, idp, store, clk.Now)
	other := startSigninOn(t, idp, store, clk.Now)

	b := newBrowser(t)
	resp, body := b.send("GET", b.toCallback(a, "/"), nil, nil)
	cookie := sessionCookie(resp)
	if cookie == "" {
		t.Fatalf("sign-in = %d %s: no cookie", resp.StatusCode, body)
	}
	withCookie := map[string]string{"Cookie": access.SessionCookieName + "=" + cookie}
	me := func(e *signinEnv) int {
		resp, _ := newBrowser(t).send("GET", e.url+"/auth/me", withCookie, nil)
		return resp.StatusCode
	}
	if got := me(other); got != http.StatusOK {
		t.Fatalf("the other runner's /auth/me with the cookie = %d, want 200", got)
	}
	logout := map[string]string{"Cookie": withCookie["Cookie"], "X-Requested-With": "fetch"}
	if resp, body := newBrowser(t).send("POST", a.url+"/auth/logout", logout, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout = %d %s", resp.StatusCode, body)
	}
	if got := me(a); got != http.StatusUnauthorized {
		t.Errorf("/auth/me on the runner that logged out = %d, want 401", got)
	}
	clk.Add(access.DefaultSessionCacheTTL)
	if got := me(other); got != http.StatusUnauthorized {
		t.Errorf("/auth/me on the other runner after its cache TTL = %d, want 401", got)
	}
}

// TestSignedInCredentialTable: the route × credential table of the runtime for the sign-in's
// credentials: a browser session, an ended one, an IdP token, an expired one and one for another
// audience, on the chat, AI SDK, session and inspect routes.
func TestSignedInCredentialTable(t *testing.T) {
	e := startSignin(t)
	e.idp.SignInAs(map[string]any{"sub": "u_ann", "email": "ann@example.com", "email_verified": true})
	signIn := func() string {
		b := newBrowser(t)
		resp, body := b.send("GET", b.toCallback(e, "/"), nil, nil)
		c := sessionCookie(resp)
		if c == "" {
			t.Fatalf("sign-in = %d %s: no cookie", resp.StatusCode, body)
		}
		return c
	}
	live, ended := signIn(), signIn()
	if err := e.sessions.End(context.Background(), ended); err != nil {
		t.Fatal(err)
	}
	idpToken := e.idp.Mint(t, map[string]any{"sub": "u_bob", "email": "bob@example.com", "email_verified": true})
	expired := e.idp.Mint(t, map[string]any{"sub": "u_bob", "email": "bob@example.com", "email_verified": true,
		"exp": time.Now().Add(-time.Hour), "iat": time.Now().Add(-2 * time.Hour)})
	foreign := e.idp.Mint(t, map[string]any{"sub": "u_bob", "email": "bob@example.com", "email_verified": true, "aud": "another-client"})

	cases := []struct {
		name   string
		header map[string]string
		status int // of the routes a signed-in user may use; 0: as a verified user's runtime token
	}{
		{"browser session", map[string]string{"Cookie": access.SessionCookieName + "=" + live, "X-Requested-With": "fetch"}, 0},
		{"ended browser session", map[string]string{"Cookie": access.SessionCookieName + "=" + ended, "X-Requested-With": "fetch"}, 401},
		{"unknown cookie", map[string]string{"Cookie": access.SessionCookieName + "=nothing", "X-Requested-With": "fetch"}, 401},
		{"IdP token", map[string]string{"Authorization": "Bearer " + idpToken}, 0},
		{"expired IdP token", map[string]string{"Authorization": "Bearer " + expired}, 401},
		{"IdP token for another audience", map[string]string{"Authorization": "Bearer " + foreign}, 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, route := range []struct {
				method, path string
				ok           int
			}{
				{"POST", "/chat/stream", 200}, {"POST", "/chat/sync", 200}, {"POST", "/chat/ai-stream", 200},
				{"GET", "/sessions/history", 200}, {"POST", "/sessions", 201}, {"GET", "/sessions/history/x", 404},
				{"GET", "/inspect/context", 403}, {"GET", "/api/sessions/dur_x", 404}, {"GET", "/auth/me", 200},
			} {
				req := e.request(route.method, route.path, "", map[string]any{"message": "hi"})
				for k, v := range c.header {
					req.Header.Set(k, v)
				}
				resp, err := e.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := c.status
				if want == 0 {
					want = route.ok
				}
				if resp.StatusCode != want {
					t.Errorf("%s %s = %d %s, want %d", route.method, route.path, resp.StatusCode, body, want)
				}
			}
		})
	}
}
