package connections_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"svc/agent"
	"svc/runner/connections"
)

// TestBodyCutEdge: a body of exactly 64 KiB comes back whole; one byte more is cut, with a
// marker and the size.
func TestBodyCutEdge(t *testing.T) {
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		switch r.URL.Path {
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(strings.Repeat("a", n)))
		case "/json": // a JSON string of n bytes in all: quotes included
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`"` + strings.Repeat("b", n-2) + `"`))
		case "/utf8": // "é" is 2 bytes: a cut at an odd offset must not split it
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("x" + strings.Repeat("é", n)))
		}
	}), []*agent.Connection{conn("status", nil, nil)}, nil)
	get := func(path string, n int) map[string]any {
		res, err := h.call(t, `{"connection":"status","method":"GET","path":"`+path+`","query":{"n":`+strconv.Itoa(n)+`}}`, nil)
		return response(t, res, err)
	}

	for _, path := range []string{"/text", "/json"} {
		out := get(path, connections.MaxBodyBytes)
		if body, _ := out["body"].(string); len(body) != connections.MaxBodyBytes-map[string]int{"/text": 0, "/json": 2}[path] || out["cut"] != nil {
			t.Errorf("%s of exactly 64 KiB: body of %d bytes, cut %v; want it whole", path, len(body), out["cut"])
		}
		out = get(path, connections.MaxBodyBytes+1)
		body, _ := out["body"].(string)
		cut, _ := out["cut"].(map[string]any)
		if cut == nil || cut["bytes"] != float64(connections.MaxBodyBytes+1) || cut["kept"] != float64(connections.MaxBodyBytes) {
			t.Errorf("%s of 64 KiB + 1: cut = %v", path, out["cut"])
		}
		marker := "\n[svc: body cut to its first 65536 bytes of 65537]"
		if !strings.HasSuffix(body, marker) || len(body) != connections.MaxBodyBytes+len(marker) {
			t.Errorf("%s of 64 KiB + 1: body ends %q (%d bytes)", path, body[max(0, len(body)-60):], len(body))
		}
	}

	out := get("/utf8", connections.MaxBodyBytes/2)
	body := out["body"].(string)
	cut := out["cut"].(map[string]any)
	if cut["kept"] != float64(connections.MaxBodyBytes-1) || !strings.HasPrefix(body, "x") || strings.ContainsRune(body, '\uFFFD') {
		t.Errorf("utf8 cut kept %v bytes; want 65535 (the last é left out whole)", cut["kept"])
	}
}

// TestBodyKinds: JSON by type or by shape, text, binary, empty, and text withheld when it
// could hold a hidden field.
func TestBodyKinds(t *testing.T) {
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/untyped-json":
			w.Header()["Content-Type"] = nil
			_, _ = w.Write([]byte(`{"a":1,"email":"x"}`))
		case "/problem":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"title":"bad","detail":{"Email":"x"}}`))
		case "/bad-json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"a":`))
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<p>hello</p>`))
		case "/html-email":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<p>email: a@b.c</p>`))
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte{0x89, 'P', 'N', 'G', 0xff, 0xfe, 0})
		case "/empty":
			w.WriteHeader(204)
		}
	}), []*agent.Connection{conn("status", nil, &agent.Access{Hidden: []string{"email"}})}, nil)
	cases := map[string]string{
		"/untyped-json": `{"status":200,"headers":{},"body":{"a":1}}`,
		"/problem":      `{"status":400,"headers":{"Content-Type":"application/problem+json"},"body":{"detail":{},"title":"bad"}}`,
		"/bad-json":     `{"status":200,"headers":{"Content-Type":"application/json"},"body":"{\"a\":"}`,
		"/html":         `{"status":200,"headers":{"Content-Type":"text/html"},"body":"<p>hello</p>"}`,
		"/html-email":   `{"status":200,"headers":{"Content-Type":"text/html"},"body":null,"note":"body withheld: it is not JSON, so the fields access.json hides cannot be removed, and it mentions \"email\""}`,
		"/png":          `{"status":200,"headers":{"Content-Type":"image/png"},"body":null,"note":"binary body not shown (image/png, 7 bytes)"}`,
		"/empty":        `{"status":204,"headers":{},"body":null}`,
	}
	for path, want := range cases {
		res, err := h.call(t, `{"connection":"status","method":"GET","path":"`+path+`"}`, nil)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if res.Content != want {
			t.Errorf("%s:\n got %s\nwant %s", path, res.Content, want)
		}
	}
}
