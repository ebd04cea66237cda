package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"svc/runner/access"
	"svc/runner/access/oidctest"
)

// TestSignInKeyIsDerived: the sign-in's state key is 32 bytes, the same for the same signing key
// and unlike the signing key itself.
func TestSignInKeyIsDerived(t *testing.T) {
	a, b := bytes.Repeat([]byte("a"), 32), bytes.Repeat([]byte("b"), 32)
	if k := signInKey(a); len(k) != 32 || !bytes.Equal(k, signInKey(a)) || bytes.Equal(k, signInKey(b)) || bytes.Equal(k, a) {
		t.Errorf("signInKey = %x: want 32 bytes, stable per signing key", k)
	}
	sum := sha256.Sum256(a)
	if bytes.Equal(signInKey(a), sum[:]) {
		t.Error("signInKey is a plain hash of the signing key, not an HMAC under it")
	}
}

// TestSignInOnTheAgentHost: svc up wired whole: PUT /api/agents/{id}/access, then a browser signs
// in on the agent's host through an OpenID provider, chats with the cookie, reads /auth/me and
// signs out; the ended session's cookie is refused.
func TestSignInOnTheAgentHost(t *testing.T) {
	ctx := context.Background()
	idp := oidctest.New(t, oidctest.Options{})
	idp.SignInAs(map[string]any{"sub": "u_ann", "email": "ann@example.com", "email_verified": true})
	p := startPlatform(t)
	a := newAgent(t, p, "signin", true)
	if err := admin(p).SetSecret(ctx, a.AgentID, "IDP_SECRET", idp.ClientSecret); err != nil {
		t.Fatal(err)
	}
	doc := `{"oidc":{"issuer":"` + idp.Issuer + `","clientId":"` + idp.ClientID + `","clientSecret":"env:IDP_SECRET"},"allow":{"domains":["example.com"]}}`
	req, err := http.NewRequest("PUT", p.url+"/api/agents/"+a.AgentID+"/access", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT access = %d", resp.StatusCode)
	}
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")

	// A browser that reaches every *.localhost host at the platform's listener.
	_, port, err := net.SplitHostPort(strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	dialer := &net.Dialer{}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil && strings.HasSuffix(host, ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return dialer.DialContext(ctx, network, addr)
	}}
	t.Cleanup(transport.CloseIdleConnections)
	browser := &http.Client{Jar: jar, Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	host := "http://signin.apps.localhost:" + port
	send := func(method, u string, header map[string]string, body string) (*http.Response, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, u, rd)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(data)
	}

	resp, body := send("GET", host+"/auth/login?return_to=/auth/me", nil, "")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), idp.Issuer) {
		t.Fatalf("GET /auth/login = %d %s", resp.StatusCode, body)
	}
	resp, body = send("GET", resp.Header.Get("Location"), nil, "")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), host+"/auth/callback?") {
		t.Fatalf("the provider = %d %s -> %q", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	resp, body = send("GET", resp.Header.Get("Location"), nil, "")
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == access.SessionCookieName {
			cookie = c.Value
		}
	}
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/auth/me" || cookie == "" {
		t.Fatalf("GET /auth/callback = %d %s -> %q, cookie %q", resp.StatusCode, body, resp.Header.Get("Location"), cookie)
	}

	xhr := map[string]string{"X-Requested-With": "fetch", "Content-Type": "application/json"}
	if resp, body := send("POST", host+"/chat/sync", xhr, `{"message":"hi"}`); resp.StatusCode != http.StatusOK || !strings.Contains(body, "echo: hi") {
		t.Fatalf("chat with the cookie = %d %s", resp.StatusCode, body)
	}
	resp, body = send("GET", host+"/auth/me", nil, "")
	var me map[string]any
	if err := json.Unmarshal([]byte(body), &me); err != nil || me["user_id"] != "u_ann" || me["auth_method"] != "browser_session" {
		t.Fatalf("GET /auth/me = %d %s", resp.StatusCode, body)
	}
	if resp, body := send("POST", host+"/auth/logout", xhr, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout = %d %s", resp.StatusCode, body)
	}
	u, _ := url.Parse(host)
	jar.SetCookies(u, []*http.Cookie{{Name: access.SessionCookieName, Value: cookie, Path: "/"}})
	if resp, body := send("GET", host+"/auth/me", nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /auth/me with the ended session's cookie = %d %s, want 401", resp.StatusCode, body)
	}
}
