package connections_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"svc/agent"
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
