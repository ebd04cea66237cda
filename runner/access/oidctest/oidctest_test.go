package oidctest_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"svc/runner/access/oidctest"
)

// TestAuthorizeRequiresPKCE: the fake refuses what a real provider configured for PKCE refuses,
// so a client that forgets PKCE or sends the wrong client fails against it.
func TestAuthorizeRequiresPKCE(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{RedirectURI: "http://agent.test/auth/callback"})
	p.SignInAs(map[string]any{"sub": "u1"})
	good := url.Values{
		"client_id": {p.ClientID}, "redirect_uri": {"http://agent.test/auth/callback"}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"st"}, "code_challenge": {"abc"}, "code_challenge_method": {"S256"},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for name, edit := range map[string]func(url.Values){
		"ok":                    func(url.Values) {},
		"plain PKCE":            func(q url.Values) { q.Set("code_challenge_method", "plain") },
		"no PKCE":               func(q url.Values) { q.Del("code_challenge") },
		"other client":          func(q url.Values) { q.Set("client_id", "other") },
		"unregistered redirect": func(q url.Values) { q.Set("redirect_uri", "http://evil.test/cb") },
		"implicit flow":         func(q url.Values) { q.Set("response_type", "token") },
		"no openid scope":       func(q url.Values) { q.Set("scope", "email") },
	} {
		q := url.Values{}
		for k, v := range good {
			q[k] = append([]string(nil), v...)
		}
		edit(q)
		resp, err := client.Get(p.Issuer + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusBadRequest
		if name == "ok" {
			want = http.StatusFound
		}
		if resp.StatusCode != want {
			t.Errorf("%s: %s, want %d", name, resp.Status, want)
		}
	}
}

func TestTokenChecksTheVerifier(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{})
	resp, err := http.PostForm(p.Issuer+"/token", url.Values{
		"grant_type": {"authorization_code"}, "code": {"unknown"}, "code_verifier": {"v"},
		"client_id": {p.ClientID}, "client_secret": {p.ClientSecret},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_grant") {
		t.Errorf("an unknown code: %s %s, want 400 invalid_grant", resp.Status, body)
	}
}
