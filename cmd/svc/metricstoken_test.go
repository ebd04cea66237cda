package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"
)

// TestMetricsTokenSetting: SVC_METRICS_TOKEN is empty by default (/metrics open) and takes a
// token of at least 16 characters without spaces; another value fails with the setting's name
// and never shows the value.
func TestMetricsTokenSetting(t *testing.T) {
	t.Setenv("SVC_METRICS_TOKEN", "")
	if err := os.Unsetenv("SVC_METRICS_TOKEN"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		value, want string
		wantErr     bool
	}{
		{"", "", false},
		{"0123456789abcdef", "0123456789abcdef", false},
		{"short-token", "", true},
		{"0123456789 abcdef", "", true},
		{"0123456789\x01abcdef", "", true},
	} {
		t.Run(tt.value, func(t *testing.T) {
			fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
			addFlags(fs, forUp|forWorker)
			if tt.value != "" {
				if err := fs.Set("metrics-token", tt.value); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := loadConfig(fs)
			switch {
			case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "SVC_METRICS_TOKEN")):
				t.Errorf("loadConfig = %v, want an error naming SVC_METRICS_TOKEN", err)
			case tt.wantErr && strings.Contains(err.Error(), tt.value):
				t.Errorf("the error %q shows the token", err)
			case !tt.wantErr && (err != nil || cfg.MetricsToken != tt.want):
				t.Errorf("MetricsToken = %q, %v; want %q", cfg.MetricsToken, err, tt.want)
			}
		})
	}
}

const metricsToken = "metrics-token-for-tests-0123"

// checkMetricsToken asserts that url (a /metrics) refuses a scrape without the token or with a
// wrong one (401) and serves it with the right one.
func checkMetricsToken(t *testing.T, url string) {
	t.Helper()
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{"no header", "", http.StatusUnauthorized},
		{"wrong token", "Bearer " + metricsToken + "-not", http.StatusUnauthorized},
		{"right token", "Bearer " + metricsToken, http.StatusOK},
	} {
		req, err := http.NewRequest("GET", url, nil)
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
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s, %s: %d, want %d", url, tt.name, resp.StatusCode, tt.want)
		}
	}
}

// TestMetricsTokenUp: with SVC_METRICS_TOKEN set, svc up's /metrics needs it; /health stays
// open. (Unset, /metrics is open: TestMetrics scrapes it without a header.)
func TestMetricsTokenUp(t *testing.T) {
	p := startPlatformAt(t, t.TempDir(), "--metrics-token", metricsToken)
	checkMetricsToken(t, p.url+"/metrics")
	if resp, err := http.Get(p.url + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/health: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestMetricsTokenRoles: with SVC_METRICS_TOKEN set, every scale-out role's /metrics needs it:
// svc api's, svc runner's own host and svc worker's --metrics-addr.
func TestMetricsTokenRoles(t *testing.T) {
	const admin = "pk_metrics_token_admin_0123456789"
	common, dbURL, _ := scaleOutFlags(t, 8, admin)
	common = append(common, "--metrics-token", metricsToken)
	apiAddr, runnerAddr, workerMetrics := freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if out, err := execute(ctx, "migrate", "--database-url", dbURL); err != nil {
		t.Fatalf("svc migrate: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		append([]string{"api", "--addr", apiAddr}, roleFlags(forAPI, common)...),
		append([]string{"worker", "--metrics-addr", workerMetrics}, roleFlags(forWorker, common)...),
		append([]string{"runner", "--addr", runnerAddr}, roleFlags(forRunner, common)...),
	} {
		wg.Go(func() {
			if out, err := execute(ctx, args...); err != nil {
				t.Errorf("svc %s: %v\n%s", args[0], err, out)
			}
		})
	}
	for _, addr := range []string{apiAddr, runnerAddr, workerMetrics} {
		waitHealthy(t, "http://"+addr+"/health")
		checkMetricsToken(t, "http://"+addr+"/metrics")
	}
}
