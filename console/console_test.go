package console_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"svc/console"
)

func newHandler(t *testing.T) *console.Handler {
	t.Helper()
	h, err := console.New(console.Config{AppsDomain: "apps.localhost:8080"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestHeaders: every answer, shell, asset, 404 and 405, carries the security headers; the CSP
// allows no inline script and connects to the platform and the agents' hosts only.
func TestHeaders(t *testing.T) {
	h := newHandler(t)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/console", 200}, {"GET", "/console/", 200}, {"GET", "/console/agents/a1", 200},
		{"GET", "/console/assets/app.js", 200}, {"HEAD", "/console/assets/app.css", 200},
		{"GET", "/console/assets/nope.js", 404}, {"POST", "/console/", 405},
	} {
		rec := serve(h, tc.method, tc.path, nil)
		if rec.Code != tc.status {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, rec.Code, tc.status)
		}
		want := map[string]string{
			"X-Frame-Options":         "DENY",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"Content-Security-Policy": console.CSP("apps.localhost:8080"),
		}
		for k, v := range want {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("%s %s: %s = %q, want %q", tc.method, tc.path, k, got, v)
			}
		}
	}
}

func TestCSP(t *testing.T) {
	csp := console.CSP("apps.example.com")
	for _, want := range []string{"default-src 'self'", "script-src 'self';", "frame-ancestors 'none'",
		"connect-src 'self' http://*.apps.example.com https://*.apps.example.com;"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP(apps.example.com) = %q, want it to contain %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP = %q allows inline or eval", csp)
	}
	if got := console.CSP(""); !strings.Contains(got, "http://*.apps.localhost") {
		t.Errorf("CSP(\"\") = %q, want the default apps domain apps.localhost", got)
	}
}

// TestShellAndAssets: page paths answer the shell, assets their own bytes and type, unknown
// asset files 404 with the error envelope.
func TestShellAndAssets(t *testing.T) {
	h := newHandler(t)
	shell := serve(h, "GET", "/console/", nil)
	if ct := shell.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" || !strings.Contains(shell.Body.String(), `src="/console/assets/app.js?v=`) {
		t.Fatalf("shell: %s %q", ct, shell.Body.String())
	}
	for _, p := range []string{"/console", "/console/signin", "/console/agents/a/playground", "/console/deployments/d1"} {
		if got := serve(h, "GET", p, nil).Body.String(); got != shell.Body.String() {
			t.Errorf("GET %s is not the shell", p)
		}
	}
	js := serve(h, "GET", "/console/assets/app.js", nil)
	if ct := js.Header().Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Errorf("app.js Content-Type = %q", ct)
	}
	missing := serve(h, "GET", "/console/assets/missing.css", nil)
	if missing.Code != 404 || !strings.Contains(missing.Body.String(), `"code":"NOT_FOUND"`) {
		t.Errorf("missing asset = %d %q, want 404 NOT_FOUND", missing.Code, missing.Body.String())
	}
	if rec := serve(h, "GET", "/console/assets/index.html", nil); rec.Code != 404 {
		t.Errorf("GET /console/assets/index.html = %d, want 404 (the shell has no asset URL)", rec.Code)
	}
}

// TestETag: a matching If-None-Match answers 304 with no body.
func TestETag(t *testing.T) {
	h := newHandler(t)
	first := serve(h, "GET", "/console/assets/app.js", nil)
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, first.Header().Get("Cache-Control"))
	}
	again := serve(h, "GET", "/console/assets/app.js", map[string]string{"If-None-Match": etag})
	if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Errorf("If-None-Match = %d with %d bytes, want 304 and none", again.Code, again.Body.Len())
	}
	if other := serve(h, "GET", "/console/assets/app.css", nil).Header().Get("ETag"); other == etag {
		t.Errorf("app.css and app.js share ETag %s", etag)
	}
}

// TestWrap: only /console and /console/... reach the console.
func TestWrap(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := console.Wrap(newHandler(t), next)
	for path, want := range map[string]int{"/console": 200, "/console/x": 200, "/consoles": 418, "/api/agents": 418, "/": 418} {
		if got := serve(h, "GET", path, nil).Code; got != want {
			t.Errorf("GET %s = %d, want %d", path, got, want)
		}
	}
}

var urlRE = regexp.MustCompile(`(?i)\b(?:https?:)?//[a-z0-9.*-]+(?::[0-9*]+)?`)

// TestNoExternalURL: no embedded file names a host other than a loopback one, so the page loads
// nothing from the network (fonts, scripts, CDNs) and works offline.
func TestNoExternalURL(t *testing.T) {
	n := 0
	err := fs.WalkDir(console.Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(console.Assets(), p)
		if err != nil {
			return err
		}
		for _, m := range urlRE.FindAllString(string(b), -1) {
			host := strings.ToLower(m[strings.Index(m, "//")+2:])
			host, _, _ = strings.Cut(host, ":")
			if !strings.HasPrefix(m, "http") && !strings.Contains(host, ".") {
				continue // a "//" comment, not a URL
			}
			if host == "localhost" || strings.HasSuffix(host, ".localhost") || host == "127.0.0.1" {
				continue
			}
			t.Errorf("%s names an external URL: %s", p, m)
		}
		return nil
	})
	if err != nil || n < 5 {
		t.Fatalf("walked %d files: %v", n, err)
	}
}

// TestVersionedURLs: the shell and the modules name their assets with ?v=, which answer as
// immutable; the same path without it (or with another version) is revalidated.
func TestVersionedURLs(t *testing.T) {
	h := newHandler(t)
	shell := serve(h, "GET", "/console/", nil).Body.String()
	m := regexp.MustCompile(`/console/assets/app\.js\?v=([0-9a-f]+)"`).FindStringSubmatch(shell)
	if m == nil {
		t.Fatalf("the shell names no versioned app.js:\n%s", shell)
	}
	js := serve(h, "GET", "/console/assets/app.js?v="+m[1], nil)
	if cc := js.Header().Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
		t.Errorf("versioned app.js Cache-Control = %q", cc)
	}
	if !strings.Contains(js.Body.String(), "from './api.js?v="+m[1]+"'") {
		t.Errorf("app.js does not import the versioned api.js")
	}
	for _, p := range []string{"/console/assets/app.js", "/console/assets/app.js?v=old"} {
		if cc := serve(h, "GET", p, nil).Header().Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s Cache-Control = %q, want no-cache", p, cc)
		}
	}
	if cc := serve(h, "GET", "/console/", nil).Header().Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("the shell's Cache-Control = %q, want no-cache", cc)
	}
}

// TestPreloads: the shell preloads the entry module and every module it imports statically,
// versioned, and not the playground, which app.js imports when its page opens.
func TestPreloads(t *testing.T) {
	h := newHandler(t)
	shell := serve(h, "GET", "/console/agents/a1", nil).Body.String()
	v := regexp.MustCompile(`/console/assets/app\.js\?v=([0-9a-f]+)"`).FindStringSubmatch(shell)
	if v == nil {
		t.Fatalf("the shell names no versioned app.js:\n%s", shell)
	}
	var got []string
	for _, m := range regexp.MustCompile(`<link rel="modulepreload" href="/console/assets/([a-z]+\.js)\?v=`+v[1]+`">`).FindAllStringSubmatch(shell, -1) {
		got = append(got, m[1])
	}
	if want := []string{"app.js", "api.js", "dom.js"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("modulepreload = %v, want %v", got, want)
	}
	app := serve(h, "GET", "/console/assets/app.js?v="+v[1], nil).Body.String()
	if !strings.Contains(app, "import('./playground.js?v="+v[1]+"')") {
		t.Errorf("app.js does not import the versioned playground.js when needed")
	}
}
