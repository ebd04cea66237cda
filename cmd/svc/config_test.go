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
			addFlags(fs, forUp|forWorker)
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

// TestParkAfterSetting: SVC_PARK_AFTER defaults to 100ms and takes a Go duration from 0s (at
// once, 1ns) to 1m, or off (negative); another value fails with the setting's name.
func TestParkAfterSetting(t *testing.T) {
	t.Setenv("SVC_PARK_AFTER", "")
	if err := os.Unsetenv("SVC_PARK_AFTER"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		value   string // "" for the default
		want    time.Duration
		wantErr bool
	}{
		{"", 100 * time.Millisecond, false},
		{"0s", time.Nanosecond, false},
		{"1m", time.Minute, false},
		{"off", -1, false},
		{"61s", 0, true},
		{"-1s", 0, true},
		{"never", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
			addFlags(fs, forUp)
			if tt.value != "" {
				if err := fs.Set("park-after", tt.value); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := loadConfig(fs)
			switch {
			case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "SVC_PARK_AFTER")):
				t.Errorf("loadConfig = %v, want an error naming SVC_PARK_AFTER", err)
			case !tt.wantErr && (err != nil || cfg.ParkAfter != tt.want):
				t.Errorf("ParkAfter = %v, %v; want %v", cfg.ParkAfter, err, tt.want)
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
			addFlags(fs, forUp|forWorker)
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

// TestHelpListsOnlyTheRoleSettings: the --help of each role lists the flags of the settings it
// reads and no other; every setting is read by at least one role; bool, int and duration settings
// show their type.
func TestHelpListsOnlyTheRoleSettings(t *testing.T) {
	roles := map[string]role{"up": forUp, "api": forAPI, "worker": forWorker, "runner": forRunner, "migrate": forMigrate}
	for _, s := range settings() {
		if s.roles == 0 || s.roles&^(servers|forMigrate) != 0 {
			t.Errorf("setting %s: roles %b, want at least one of up, api, worker, runner, migrate", s.env, s.roles)
		}
	}
	for name, r := range roles {
		t.Run(name, func(t *testing.T) {
			out, err := execute(t.Context(), name, "--help")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range settings() {
				has := strings.Contains(out, "--"+s.flag+" ")
				if want := s.roles&r != 0; has != want {
					t.Errorf("svc %s --help lists --%s: %v, want %v", name, s.flag, has, want)
				}
			}
		})
	}
	out, err := execute(t.Context(), "up", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--handler-timeout duration", "--handler-procs int", "--allow-metadata-addresses ", "--addr string"} {
		if !strings.Contains(out, want) {
			t.Errorf("svc up --help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--s3-use-ssl string") || strings.Contains(out, "--allow-metadata-addresses string") {
		t.Errorf("svc up --help shows a bool setting as a string:\n%s", out)
	}
}

// TestSettingsOfOtherRolesAreNotRead: svc migrate does not read SVC_HANDLER_PROCS (a runtime
// setting), even when it is bad, while svc up refuses it naming it.
func TestSettingsOfOtherRolesAreNotRead(t *testing.T) {
	t.Setenv("SVC_HANDLER_PROCS", "lots")
	fs := pflag.NewFlagSet("migrate", pflag.ContinueOnError)
	addFlags(fs, forMigrate)
	if fs.Lookup("handler-procs") != nil {
		t.Error("migrate declares --handler-procs")
	}
	if _, err := loadConfig(fs); err != nil {
		t.Errorf("migrate's config = %v, want SVC_HANDLER_PROCS not read", err)
	}
	fs = pflag.NewFlagSet("up", pflag.ContinueOnError)
	addFlags(fs, forUp)
	if _, err := loadConfig(fs); err == nil || !strings.Contains(err.Error(), "SVC_HANDLER_PROCS") {
		t.Errorf("up's config = %v, want an error naming SVC_HANDLER_PROCS", err)
	}
}
