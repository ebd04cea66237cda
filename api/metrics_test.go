package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"svc/api"
	"svc/migrations/dbtest"
)

// GET /metrics with SVC_METRICS_TOKEN set needs it as a bearer token: no header, another
// scheme or a wrong token are 401 UNAUTHENTICATED (with WWW-Authenticate); unset, /metrics is
// open.
func TestMetricsHandlerToken(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_test_total", Help: "A test counter."}))
	const token = "metrics-token-0123456789"
	protected := httptest.NewServer(api.MetricsHandler(reg, token))
	t.Cleanup(protected.Close)
	open := httptest.NewServer(api.MetricsHandler(reg, ""))
	t.Cleanup(open.Close)
	for _, tt := range []struct {
		name, url, auth string
		want            int
	}{
		{"no header", protected.URL, "", 401},
		{"wrong token", protected.URL, "Bearer metrics-token-012345678", 401},
		{"longer token", protected.URL, "Bearer " + token + "x", 401},
		{"another scheme", protected.URL, "Basic " + token, 401},
		{"the token alone", protected.URL, token, 401},
		{"right token", protected.URL, "Bearer " + token, 200},
		{"scheme in lower case", protected.URL, "bearer " + token, 200},
		{"unset, no header", open.URL, "", 200},
		{"unset, any header", open.URL, "Bearer whatever", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", tt.url+"/metrics", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, body)
			}
			if tt.want == 200 {
				if !strings.Contains(string(body), "svc_test_total 0") {
					t.Errorf("body lacks the metrics: %s", body)
				}
				return
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "UNAUTHENTICATED" || !strings.Contains(e.Error.Message, "SVC_METRICS_TOKEN") {
				t.Errorf("body %s, want UNAUTHENTICATED naming SVC_METRICS_TOKEN", body)
			}
			if strings.Contains(string(body), "svc_test_total") {
				t.Error("a refused scrape got metrics")
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("no WWW-Authenticate")
			}
		})
	}
}

// A request method the client makes up is not a label value: it counts as "other".
func TestMetricsMethodLabel(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	for i := range 5 {
		h.do(request{method: "X-MADE-UP-" + strings.Repeat("M", i*1000), path: "/api/agents", token: h.admin})
	}
	body := h.do(request{method: "GET", path: "/metrics"}).Body.String()
	if strings.Contains(body, "MADE-UP") {
		t.Errorf("/metrics holds a made-up method:\n%.2000s", body)
	}
	if !strings.Contains(body, `svc_http_requests_total{method="other",route="unmatched",status="405"} 5`) {
		t.Errorf("/metrics lacks the made-up methods as other:\n%.3000s", body)
	}
}
