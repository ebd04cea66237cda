package runtime_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"svc/runner/access"
	"svc/runner/access/memsessions"
	"svc/runner/access/oidctest"
)

// authCase is one credential kind of BenchmarkAuthenticate: set puts the credential on a
// request; fresh, when set, makes a new credential before each operation, off the clock.
type authCase struct {
	name  string
	set   func(req *http.Request)
	fresh func(b *testing.B) func(req *http.Request)
}

// BenchmarkAuthenticate is what a request pays for its credential, for each kind, in one run and
// on one runtime that accepts them all (AUTH_TOKEN, ak_ keys, runtime tokens, the agent's IdP and
// the svc_session cookie, checked in the runtime's order): a whole GET /auth/me through the
// runtime's ServeHTTP into an httptest.ResponseRecorder, no network. Besides ns/op it reports
// p50-µs, the median of the operations' own durations, and Δp50-µs, that median less the
// runtime_token median measured just before it (issue 26's budget is +20 µs). oidc_token reuses
// one token (a client sends the same bearer until it expires); oidc_token_fresh signs a new one
// before each operation, off the clock, so each pays the RSA verification.
func BenchmarkAuthenticate(b *testing.B) {
	idp := oidctest.New(b, oidctest.Options{})
	idp.SignInAs(map[string]any{"sub": "u_ann", "email": "ann@example.com", "email_verified": true})
	keys := newKeys(b)
	opts := signinOptions(b, idp, memsessions.New(), nil)
	opts.Keys = keys.checker
	opts.AuthToken = "bench-auth-token"
	e := &signinEnv{env: start(b, opts), idp: idp, sessions: opts.Access.Sessions}

	br := newBrowser(b)
	resp, body := br.send("GET", br.toCallback(e, "/"), nil, nil)
	cookie := sessionCookie(resp)
	if cookie == "" {
		b.Fatalf("sign-in = %d %s: no cookie", resp.StatusCode, body)
	}
	bearer := func(tok string) func(*http.Request) {
		return func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+tok) }
	}
	minted := 0
	bob := map[string]any{"sub": "u_bob", "email": "bob@example.com", "email_verified": true}
	cases := []authCase{
		{name: "runtime_token", set: bearer(newSigner(b).token(signinAgent, "u_carl", ""))},
		{name: "api_key", set: bearer(keys.create(b, signinAgent))},
		{name: "browser_session", set: func(req *http.Request) {
			req.Header.Set("Cookie", access.SessionCookieName+"="+cookie)
			req.Header.Set("X-Requested-With", "fetch")
		}},
		{name: "oidc_token", set: bearer(idp.Mint(b, bob))},
		{name: "oidc_token_fresh", fresh: func(b *testing.B) func(*http.Request) {
			minted++ // a new jti: Mint within one second would otherwise sign the same token again
			return bearer(idp.Mint(b, map[string]any{"sub": "u_bob", "email": "bob@example.com", "email_verified": true, "jti": strconv.Itoa(minted)}))
		}},
		{name: "auth_token", set: bearer(opts.AuthToken)},
	}
	var base float64 // runtime_token's p50 in µs
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p50 := benchAuthRequest(b, e, c)
			if c.name == "runtime_token" {
				base = p50
			}
			b.ReportMetric(p50, "p50-µs")
			if base > 0 {
				b.ReportMetric(p50-base, "Δp50-µs")
			}
		})
	}
}

// benchAuthRequest runs b.N GET /auth/me with c's credential and returns the median duration of
// one ServeHTTP in µs. Each answer must be 200: a refused credential would be cheaper.
func benchAuthRequest(b *testing.B, e *signinEnv, c authCase) float64 {
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		set := c.set
		if c.fresh != nil {
			b.StopTimer()
			set = c.fresh(b)
			b.StartTimer()
		}
		req := httptest.NewRequest("GET", "/auth/me", nil)
		set(req)
		w := httptest.NewRecorder()
		t0 := time.Now()
		e.rt.ServeHTTP(w, req)
		durs = append(durs, time.Since(t0))
		if w.Code != http.StatusOK {
			b.Fatalf("GET /auth/me = %d %s", w.Code, w.Body)
		}
	}
	b.StopTimer()
	slices.Sort(durs)
	return float64(durs[len(durs)/2].Nanoseconds()) / 1e3
}
