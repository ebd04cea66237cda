package access_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"svc/runner/access"
)

const secret = "svc-test-secret"

// authorize follows the login redirect to the provider, as a browser would, and returns the query
// the provider sends back to the callback.
func authorize(t *testing.T, loginURL string) url.Values {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(loginURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %s, want 302", resp.Status)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Scheme + "://" + back.Host + back.Path; got != origin+access.CallbackPath {
		t.Fatalf("the provider sent the browser to %s, want %s", got, origin+access.CallbackPath)
	}
	return back.Query()
}

func TestSignIn(t *testing.T) {
	f := newFixture(t)
	f.idp.SignInAs(map[string]any{"sub": "u-ada", "email": "ada@example.com", "org": "org-1", "groups": []string{"eng"}})
	ctx := context.Background()
	login, err := f.signIn.Login(ctx, f.settings, origin, "/chat?x=1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(login.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for name, want := range map[string]string{
		"client_id": f.idp.ClientID, "redirect_uri": origin + "/auth/callback", "response_type": "code",
		"code_challenge_method": "S256", "scope": "openid email profile",
	} {
		if q.Get(name) != want {
			t.Errorf("authorization URL %s = %q, want %q", name, q.Get(name), want)
		}
	}
	for _, name := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(name)) < 43 {
			t.Errorf("authorization URL %s = %q, want a random value", name, q.Get(name))
		}
	}
	if strings.Contains(login.StateCookie, q.Get("state")) || strings.Contains(login.StateCookie, "/chat") {
		t.Error("the state cookie shows its content; want it sealed")
	}
	// Another runner, with the same key, finishes the flow.
	other, err := access.NewSignIn(f.providers, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	got, err := other.Callback(ctx, f.settings, origin, authorize(t, login.URL), login.StateCookie, secret)
	if err != nil {
		t.Fatal(err)
	}
	id := got.Identity
	if id.UserID != "u-ada" || id.Email != "ada@example.com" || id.OrgID != "org-1" || id.Method != access.MethodBrowserSession || got.ReturnTo != "/chat?x=1" {
		t.Errorf("Callback = %+v", got)
	}
}

func TestSignInRefusals(t *testing.T) {
	ctx := context.Background()
	admitted := map[string]any{"sub": "u-ada", "email": "ada@example.com"}
	tests := []struct {
		name string
		// setup may change the provider, and the query and cookie handed to the callback; nil
		// signs in a user no allow rule admits.
		setup func(t *testing.T, f *fixture, q url.Values, cookie *string)
		want  error
	}{
		{"wrong state", func(_ *testing.T, _ *fixture, q url.Values, _ *string) { q.Set("state", "forged") }, access.ErrState},
		{"no state cookie", func(_ *testing.T, _ *fixture, _ url.Values, c *string) { *c = "" }, access.ErrState},
		{"forged state cookie", func(_ *testing.T, _ *fixture, _ url.Values, c *string) { *c = (*c)[:len(*c)-4] + "AAAA" }, access.ErrState},
		{"another sign-in's cookie", func(t *testing.T, f *fixture, _ url.Values, c *string) {
			other, err := f.signIn.Login(ctx, f.settings, origin, "/")
			if err != nil {
				t.Fatal(err)
			}
			*c = other.StateCookie
		}, access.ErrState},
		{"cookie of another agent's host", func(t *testing.T, f *fixture, _ url.Values, c *string) {
			other, err := f.signIn.Login(ctx, f.settings, "https://other-agent.test", "/")
			if err != nil {
				t.Fatal(err)
			}
			*c = other.StateCookie
		}, access.ErrState},
		{"sign-in older than ten minutes", func(_ *testing.T, f *fixture, _ url.Values, _ *string) { f.clock.Advance(11 * time.Minute) }, access.ErrState},
		{"wrong nonce", func(_ *testing.T, f *fixture, _ url.Values, _ *string) {
			f.idp.EditIDTokens(func(c map[string]any) { c["nonce"] = "replayed" })
		}, access.ErrNonce},
		{"expired ID token", func(_ *testing.T, f *fixture, _ url.Values, _ *string) {
			f.idp.EditIDTokens(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() })
		}, access.ErrTokenExpired},
		{"ID token for another client", func(_ *testing.T, f *fixture, _ url.Values, _ *string) {
			f.idp.EditIDTokens(func(c map[string]any) { c["aud"] = "another-client" })
		}, access.ErrWrongAudience},
		{"user no allow rule admits", nil, access.ErrAccessDenied},
		{"code used twice", func(t *testing.T, f *fixture, q url.Values, c *string) {
			if _, err := f.signIn.Callback(ctx, f.settings, origin, q, *c, secret); err != nil {
				t.Fatal(err)
			}
		}, access.ErrProvider},
		{"provider refused the user", func(_ *testing.T, _ *fixture, q url.Values, _ *string) {
			q.Del("code")
			q.Set("error", "access_denied")
		}, access.ErrProvider},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.setup == nil { // the user no allow rule admits
				f.idp.SignInAs(map[string]any{"sub": "u-eve", "email": "eve@evil.com", "groups": []string{"eng"}})
			} else {
				f.idp.SignInAs(admitted)
			}
			login, err := f.signIn.Login(ctx, f.settings, origin, "/")
			if err != nil {
				t.Fatal(err)
			}
			q := authorize(t, login.URL)
			cookie := login.StateCookie
			if tt.setup != nil {
				tt.setup(t, f, q, &cookie)
			}
			got, err := f.signIn.Callback(ctx, f.settings, origin, q, cookie, secret)
			if !errors.Is(err, tt.want) {
				t.Errorf("Callback = %+v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestSignInWrongClientSecret(t *testing.T) {
	f := newFixture(t)
	f.idp.SignInAs(map[string]any{"sub": "u-ada", "email": "ada@example.com"})
	login, err := f.signIn.Login(context.Background(), f.settings, origin, "/")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.signIn.Callback(context.Background(), f.settings, origin, authorize(t, login.URL), login.StateCookie, "wrong")
	var pe *access.ProviderError
	if !errors.As(err, &pe) || pe.Code != "invalid_client" {
		t.Errorf("Callback with a wrong client secret = %v, want the provider's invalid_client", err)
	}
}

func TestReturnTo(t *testing.T) {
	for _, ok := range []struct{ in, want string }{
		{"", "/"}, {"/", "/"}, {"/chat", "/chat"}, {"/chat?session=s1#end", "/chat?session=s1#end"}, {"/a/b/%2F", "/a/b/%2F"},
	} {
		if got, err := access.CheckReturnTo(ok.in); err != nil || got != ok.want {
			t.Errorf("CheckReturnTo(%q) = %q, %v; want %q", ok.in, got, err, ok.want)
		}
	}
	for _, bad := range []string{
		"//evil.com", "https://evil.com", `/\evil.com`, `\\evil.com`, "javascript:alert(1)", "evil.com",
		"/\t/evil.com", "/\n/evil.com", "/x//evil.com", "///evil.com", "http:/evil.com", "/\x00", strings.Repeat("/a", 1100),
	} {
		_, err := access.CheckReturnTo(bad)
		var rt *access.ReturnToError
		if !errors.Is(err, access.ErrReturnTo) || !errors.As(err, &rt) || rt.Value != bad {
			t.Errorf("CheckReturnTo(%q) = %v, want a *ReturnToError", bad, err)
		}
	}
}

func TestLoginRefusesOpenRedirects(t *testing.T) {
	f := newFixture(t)
	for _, bad := range []string{"//evil.com", "https://evil.com", `/\evil.com`, "javascript:alert(1)"} {
		if _, err := f.signIn.Login(context.Background(), f.settings, origin, bad); !errors.Is(err, access.ErrReturnTo) {
			t.Errorf("Login(return_to=%q) = %v, want ErrReturnTo", bad, err)
		}
	}
}

func TestNewSignInKey(t *testing.T) {
	if _, err := access.NewSignIn(access.NewProviders(access.ProvidersParams{}), make([]byte, 16)); err == nil {
		t.Error("NewSignIn with a 16-byte key = nil error, want one asking for 32 bytes")
	}
}
