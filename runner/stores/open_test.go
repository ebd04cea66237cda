package stores_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/stores"
)

func TestOpenChoosesTheBackend(t *testing.T) {
	ctx := context.Background()
	platform := dbtest.SQLite(t)
	tests := []struct {
		name     string
		cfg      *agent.StoresConfig
		platform bool
		want     string // the backend's type
	}{
		{"no entry, no platform database", nil, false, "*stores.Memory"},
		{"no entry", nil, true, "*stores.SQL"},
		{"memory", &agent.StoresConfig{Backend: "memory"}, true, "*stores.Memory"},
		{"memory with a url", &agent.StoresConfig{Backend: "memory", URL: "env:NOPE"}, true, "*stores.Memory"},
		{"sqlite without a url", &agent.StoresConfig{Backend: "sqlite"}, true, "*stores.SQL"},
		{"postgres without a url", &agent.StoresConfig{Backend: "postgres"}, true, "*stores.SQL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := stores.OpenParams{Config: tc.cfg, AgentID: "a"}
			if tc.platform {
				p.Platform = platform
			}
			b, err := stores.Open(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := typeName(b); got != tc.want {
				t.Fatalf("Open gave a %s, want %s", got, tc.want)
			}
		})
	}
	// Closing a backend over the platform database leaves it open.
	b, err := stores.Open(ctx, stores.OpenParams{Platform: platform})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := platform.Exec("SELECT 1").Error; err != nil {
		t.Fatalf("the platform database was closed: %v", err)
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *stores.Memory:
		return "*stores.Memory"
	case *stores.SQL:
		return "*stores.SQL"
	}
	return "unknown"
}

func TestOpenRefusesBadConfig(t *testing.T) {
	const secret = "s3cret"
	env := map[string]string{
		"PG":     "postgres://u:" + secret + "@127.0.0.1:1/x?sslmode=disable&connect_timeout=2",
		"FILE":   "/tmp/" + secret + ".db",
		"OTHER":  "mysql://u:" + secret + "@h/x",
		"EMPTY":  "",
		"SQLITE": "sqlite:" + secret + ".db",
	}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	tests := []struct {
		name  string
		cfg   agent.StoresConfig
		field string
		text  string
	}{
		{"unknown backend", agent.StoresConfig{Backend: "mysql"}, "stores.backend", `got "mysql"`},
		{"no url, no platform database", agent.StoresConfig{Backend: "sqlite"}, "stores.url", "this runtime has none"},
		{"not an env reference", agent.StoresConfig{Backend: "postgres", URL: "postgres://x"}, "stores.url", "env: reference"},
		{"unset variable", agent.StoresConfig{Backend: "postgres", URL: "env:MISSING"}, "stores.url", "env:MISSING is not set"},
		{"empty variable", agent.StoresConfig{Backend: "postgres", URL: "env:EMPTY"}, "stores.url", "env:EMPTY is not set"},
		{"postgres with a file", agent.StoresConfig{Backend: "postgres", URL: "env:FILE"}, "stores.url", "needs a postgres:// URL"},
		{"postgres with sqlite", agent.StoresConfig{Backend: "postgres", URL: "env:SQLITE"}, "stores.url", "needs a postgres:// URL"},
		{"sqlite with postgres", agent.StoresConfig{Backend: "sqlite", URL: "env:PG"}, "stores.url", "needs sqlite:PATH"},
		{"sqlite with another URL", agent.StoresConfig{Backend: "sqlite", URL: "env:OTHER"}, "stores.url", "needs sqlite:PATH"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			_, err := stores.Open(context.Background(), stores.OpenParams{Config: &cfg, Env: lookup})
			if !errors.Is(err, stores.ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			if msg := err.Error(); !strings.Contains(msg, `"`+tc.field+`"`) || !strings.Contains(msg, tc.text) || strings.Contains(msg, secret) {
				t.Fatalf("err = %q, want it to name %s, say %q and hide the URL", msg, tc.field, tc.text)
			}
		})
	}
	t.Run("unreachable database", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := stores.Open(ctx, stores.OpenParams{Config: &agent.StoresConfig{Backend: "postgres", URL: "env:PG"}, Env: lookup})
		if err == nil || !strings.Contains(err.Error(), `"stores.url"`) || strings.Contains(err.Error(), secret) {
			t.Fatalf("err = %v, want one naming stores.url without the password", err)
		}
		t.Log(err)
	})
}
