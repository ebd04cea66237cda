package connections_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/tools"
)

// TestSecretsNeverLeak makes calls whose server echoes the whole request (auth header and
// query included) and fails in every way, and greps everything that leaves the package — the
// results, the errors, the labels, the logs — for any form of the secret values.
func TestSecretsNeverLeak(t *testing.T) {
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hangup":
			hj, ok := w.(http.Hijacker)
			if !ok {
				t.Error("no hijacker")
				return
			}
			c, _, err := hj.Hijack()
			if err == nil {
				c.Close()
			}
		case "/text":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Location", r.URL.String())
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("bad token " + r.Header.Get("Authorization") + " for url " + r.URL.String() + " key " + r.URL.Query().Get("api_key")))
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(strings.Repeat("x", 65530) + r.Header.Get("Authorization") + strings.Repeat("y", 100)))
		default:
			echo(http.StatusInternalServerError)(w, r)
		}
	}), []*agent.Connection{conn("status", nil, nil)}, nil)

	var outputs []string
	keep := func(res tools.Result, err error) {
		outputs = append(outputs, res.Content, string(res.Data))
		if err != nil {
			outputs = append(outputs, err.Error())
		}
	}
	for _, path := range []string{"/echo", "/text", "/big", "/hangup"} {
		args := `{"connection":"status","method":"GET","path":"` + path + `","query":{"q":"1"}}`
		res, err := h.call(t, args, nil)
		keep(res, err)
		run, done := h.tool.Labels(json.RawMessage(args))
		outputs = append(outputs, run, done)
	}
	if !strings.Contains(outputs[0], `"status":500`) || !strings.Contains(outputs[0], "[redacted]") {
		t.Errorf("the echo call did not come back redacted: %.300s", outputs[0])
	}
	// A host that does not resolve: the transport's error text holds the URL with api_key.
	port := h.srv.URL[strings.LastIndex(h.srv.URL, ":"):]
	h.secrets["API_URL"] = "http://nowhere.test" + port
	keep(h.call(t, `{"connection":"status","method":"GET","path":"/x"}`, nil))
	// A refused dial.
	h.secrets["API_URL"] = "http://metadata.test" + port
	keep(h.call(t, `{"connection":"status","method":"GET","path":"/x"}`, nil))
	// The health probe against a failing path.
	h.secrets["API_URL"] = h.srv.URL
	if err := h.client.Check(context.Background(), "status"); err != nil {
		outputs = append(outputs, err.Error())
	} else {
		t.Error("Check of a 500 passed")
	}
	outputs = append(outputs, h.logs.String())

	forms := []string{secretToken, "sk-test-TOKEN-8c1f0e9a", secretKey, url.QueryEscape(secretKey), url.PathEscape(secretKey), "SECRET", "8c1f0e9a"}
	for i, out := range outputs {
		for _, f := range forms {
			if strings.Contains(out, f) {
				t.Errorf("output %d holds the secret form %q:\n%.2000s", i, f, out)
			}
		}
	}
	if !strings.Contains(h.logs.String(), "connection request") {
		t.Errorf("no request was logged: %s", h.logs.String())
	}
}

// A credential too short to redact safely is refused when a call resolves it, before anything
// is sent: the error names the connection, the field and the variable, never the value. Under
// the old substring redaction a one-character token turned every such character of a result
// into [redacted], which mangled the result and showed the token. /health reports it too,
// with or without a testPath.
func TestShortCredentialRefused(t *testing.T) {
	var sent atomic.Int64
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		echo(http.StatusOK)(w, r)
	}), []*agent.Connection{
		conn("status", nil, nil),
		{Name: "untested", Spec: agent.ConnectionSpec{BaseURL: "env:API_URL", Format: "rest",
			Auth: &agent.ConnectionAuth{Query: map[string]string{"key": "env:API_TOKEN"}}}},
	}, nil)
	for _, tt := range []struct {
		name, token, field string
	}{
		{"one character", "x", "auth.headers.Authorization"},
		{"seven characters", "abc1234", "auth.headers.Authorization"},
		{"a scheme and a short token", "Bearer x", "auth.headers.Authorization"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.secrets["API_TOKEN"] = tt.token
			before := sent.Load()
			res, err := h.call(t, `{"connection":"status","method":"GET","path":"/incidents/1"}`, nil)
			var short *connections.ShortCredentialError
			if !errors.As(err, &short) || short.Field != tt.field || short.Ref != "env:API_TOKEN" {
				t.Fatalf("call = %q, %v; want a ShortCredentialError of %s", res.Content, err, tt.field)
			}
			for _, want := range []string{"connection status", tt.field, "env:API_TOKEN", "at least 8 characters"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if sent.Load() != before {
				t.Error("the request was sent")
			}
			if err := h.client.Check(context.Background(), "status"); !errors.As(err, &short) || !strings.Contains(err.Error(), "connection status") {
				t.Errorf("Check(status) = %v, want the short credential", err)
			}
			if err := h.client.Check(context.Background(), "untested"); !errors.As(err, &short) || short.Field != "auth.query.key" {
				t.Errorf("Check(untested) = %v, want the short credential of auth.query.key", err)
			}
		})
	}
	// Eight characters are enough; a connection without testPath is then unchecked, as before.
	h.secrets["API_TOKEN"] = "Bearer abcd1234"
	if res, err := h.call(t, `{"connection":"status","method":"GET","path":"/incidents/1"}`, nil); err != nil || !strings.Contains(res.Content, `"status":200`) {
		t.Errorf("call with an 8-character token = %.200s, %v", res.Content, err)
	}
	if err := h.client.Check(context.Background(), "untested"); !errors.Is(err, connections.ErrNoTestPath) {
		t.Errorf("Check(untested) = %v, want ErrNoTestPath", err)
	}
}

// A value made of a {{context.KEY}} template holds the chat's own data: it is sent however
// short, and a short one is not redacted, so that results keep their words.
func TestShortTemplatedValueSent(t *testing.T) {
	c := conn("crm", nil, nil)
	c.Spec.Auth.Headers["X-Tenant"] = "env:TENANT_HEADER"
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"tenant": r.Header.Get("X-Tenant"), "text": "ab cd ab"})
	}), []*agent.Connection{c}, nil)
	h.secrets["TENANT_HEADER"] = "{{context.tenant}}"
	res, err := h.call(t, `{"connection":"crm","method":"GET","path":"/x"}`, map[string]string{"tenant": "ab"})
	out := response(t, res, err)
	if d := cmp.Diff(map[string]any{"tenant": "ab", "text": "ab cd ab"}, out["body"]); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
}

// Redaction removes the secret where it stands as a value and leaves the rest of a result as
// the API sent it: an id or a word that merely contains the secret's characters is not
// rewritten, and the secret itself never comes back, whether alone, in a sentence, quoted, as
// a query value or after its scheme.
func TestRedactionKeepsResults(t *testing.T) {
	const token = "tok4f9a2c77"
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/next?key="+token+"&page=2")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"echo":    r.Header.Get("Authorization"),
			"alone":   token,
			"message": "token " + token + " expired.",
			"quoted":  `"` + token + `"`,
			"id":      token + "5",       // another value that starts with the secret
			"ref":     "x" + token,       // one that ends with it
			"counter": "tokens: 4, 9, 2", // letters the secret has, not the secret
			token:     "a key",
		})
	}), []*agent.Connection{conn("status", nil, nil)}, nil)
	h.secrets["API_TOKEN"] = "Bearer " + token
	res, err := h.call(t, `{"connection":"status","method":"GET","path":"/incidents/1"}`, nil)
	out := response(t, res, err)
	want := map[string]any{
		"echo": "[redacted]", "alone": "[redacted]", "message": "token [redacted] expired.", "quoted": `"[redacted]"`,
		"id": token + "5", "ref": "x" + token, "counter": "tokens: 4, 9, 2", "[redacted]": "a key",
	}
	if d := cmp.Diff(want, out["body"]); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
	if loc := out["headers"].(map[string]any)["Location"]; loc != "/next?key=[redacted]&page=2" {
		t.Errorf("Location = %v", loc)
	}
}
