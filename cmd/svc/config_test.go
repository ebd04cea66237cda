package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestQueuePollIntervalSetting: SVC_QUEUE_POLL_INTERVAL defaults to 50ms and takes a Go duration
// from 10ms to 10s; another value fails with the setting's name.
func TestQueuePollIntervalSetting(t *testing.T) {
	t.Setenv("SVC_QUEUE_POLL_INTERVAL", "")                        // restored when the test ends
	if err := os.Unsetenv("SVC_QUEUE_POLL_INTERVAL"); err != nil { // the default, whatever the environment says
		t.Fatal(err)
	}
	tests := []struct {
		value   string // "" for the default
		want    time.Duration
		wantErr bool
	}{
		{"", 50 * time.Millisecond, false},
		{"10ms", 10 * time.Millisecond, false},
		{"2s", 2 * time.Second, false},
		{"5ms", 0, true},
		{"11s", 0, true},
		{"soon", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
			addFlags(fs)
			if tt.value != "" {
				if err := fs.Set("queue-poll-interval", tt.value); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := loadConfig(fs)
			switch {
			case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "SVC_QUEUE_POLL_INTERVAL")):
				t.Errorf("loadConfig = %v, want an error naming SVC_QUEUE_POLL_INTERVAL", err)
			case !tt.wantErr && (err != nil || cfg.QueuePollInterval != tt.want):
				t.Errorf("QueuePollInterval = %v, %v; want %v", cfg.QueuePollInterval, err, tt.want)
			}
		})
	}
}

// TestMetricsAddrSetting: SVC_METRICS_ADDR is empty by default (svc worker serves no metrics)
// and takes host:port; another value fails with the setting's name.
func TestMetricsAddrSetting(t *testing.T) {
	t.Setenv("SVC_METRICS_ADDR", "")
	if err := os.Unsetenv("SVC_METRICS_ADDR"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		value, want string
		wantErr     bool
	}{
		{"", "", false},
		{"127.0.0.1:9090", "127.0.0.1:9090", false},
		{":9090", ":9090", false},
		{"9090", "", true},
		{"http://127.0.0.1:9090", "", true},
	} {
		t.Run(tt.value, func(t *testing.T) {
			fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
			addFlags(fs)
			if tt.value != "" {
				if err := fs.Set("metrics-addr", tt.value); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := loadConfig(fs)
			switch {
			case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "SVC_METRICS_ADDR")):
				t.Errorf("loadConfig = %v, want an error naming SVC_METRICS_ADDR", err)
			case !tt.wantErr && (err != nil || cfg.MetricsAddr != tt.want):
				t.Errorf("MetricsAddr = %q, %v; want %q", cfg.MetricsAddr, err, tt.want)
			}
		})
	}
}
