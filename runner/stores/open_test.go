package stores_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/stores"
	"svc/runner/tools"
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

// TestOpenRefusesBadConfig: what is wrong with the entry itself fails Open.
func TestOpenRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name  string
		cfg   agent.StoresConfig
		field string
		text  string
	}{
		{"unknown backend", agent.StoresConfig{Backend: "mysql"}, "stores.backend", `got "mysql"`},
		{"no url, no platform database", agent.StoresConfig{Backend: "sqlite"}, "stores.url", "this runtime has none"},
		{"not an env reference", agent.StoresConfig{Backend: "postgres", URL: "postgres://x"}, "stores.url", "env: reference"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			_, err := stores.Open(context.Background(), stores.OpenParams{Config: &cfg})
			if !errors.Is(err, stores.ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			if msg := err.Error(); !strings.Contains(msg, `"`+tc.field+`"`) || !strings.Contains(msg, tc.text) {
				t.Fatalf("err = %q, want it to name %s and say %q", msg, tc.field, tc.text)
			}
		})
	}
}

// TestOpenUnavailableDatabase: a url that does not resolve to a database of the backend's kind,
// or a database that does not open, fails each use of the stores (ErrUnavailable, naming the
// field and the reference, never the URL), not Open.
func TestOpenUnavailableDatabase(t *testing.T) {
	const secret = "s3cret"
	env := map[string]string{
		"PG":     "postgres://u:" + secret + "@127.0.0.1:1/x?sslmode=disable&connect_timeout=2",
		"FILE":   "/tmp/" + secret + ".db",
		"OTHER":  "mysql://u:" + secret + "@h/x",
		"EMPTY":  "",
		"SQLITE": "sqlite:" + secret + ".db",
	}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	hint := func(name string) string { return "set it with `svc secrets set a " + name + "`" }
	tests := []struct {
		name   string
		cfg    agent.StoresConfig
		config bool // the url is at fault (ErrConfig)
		text   string
	}{
		{"unset variable", agent.StoresConfig{Backend: "postgres", URL: "env:MISSING"}, true, "env:MISSING is not set; set it with `svc secrets set a MISSING`"},
		{"empty variable", agent.StoresConfig{Backend: "postgres", URL: "env:EMPTY"}, true, "env:EMPTY is not set"},
		{"postgres with a file", agent.StoresConfig{Backend: "postgres", URL: "env:FILE"}, true, "needs a postgres:// URL"},
		{"postgres with sqlite", agent.StoresConfig{Backend: "postgres", URL: "env:SQLITE"}, true, "needs a postgres:// URL"},
		{"sqlite with postgres", agent.StoresConfig{Backend: "sqlite", URL: "env:PG"}, true, "needs sqlite:PATH"},
		{"sqlite with another URL", agent.StoresConfig{Backend: "sqlite", URL: "env:OTHER"}, true, "needs sqlite:PATH"},
		{"unreachable database", agent.StoresConfig{Backend: "postgres", URL: "env:PG"}, false, "open the database of env:PG"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cfg := tc.cfg
			b, err := stores.Open(ctx, stores.OpenParams{Config: &cfg, Env: lookup, Hint: hint})
			if err != nil {
				t.Fatalf("Open = %v, want the failure at the first use", err)
			}
			defer b.Close()
			_, err = b.Get(ctx, "tickets", "k")
			if !errors.Is(err, stores.ErrUnavailable) || errors.Is(err, stores.ErrConfig) != tc.config {
				t.Fatalf("Get = %v, want ErrUnavailable (and ErrConfig: %v)", err, tc.config)
			}
			if msg := err.Error(); !strings.Contains(msg, `"stores.url"`) || !strings.Contains(msg, tc.text) || strings.Contains(msg, secret) {
				t.Fatalf("err = %q, want it to name stores.url, say %q and hide the URL", msg, tc.text)
			}
		})
	}
}

// TestOpenLazilyOncePresent: a url set after the runtime started (a secret set later) applies
// at the next use, without a new backend; the database is opened once and closed with the
// backend, and the tool of the store says why it fails until then.
func TestOpenLazilyOncePresent(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	env := map[string]string{}
	lookups := 0
	lookup := func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		lookups++
		v, ok := env[name]
		return v, ok
	}
	b, err := stores.Open(ctx, stores.OpenParams{Config: &agent.StoresConfig{Backend: "sqlite", URL: "env:DESK_DB"}, AgentID: "a", Env: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if lookups != 0 {
		t.Errorf("Open resolved the url %d times, want none before the first use", lookups)
	}
	recs, err := stores.New(stores.Params{Stores: map[string]*agent.Store{"notes": noteStore()}, Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	set, err := stores.NewTool(recs, "notes", stores.ActionSet)
	if err != nil {
		t.Fatal(err)
	}
	res, err := set.Call(ctx, tools.Call{ID: "c1", Arguments: json.RawMessage(`{"id":"n1","text":"hi"}`)})
	if err != nil || !res.IsError || !strings.Contains(res.Content, "env:DESK_DB is not set; set it as an agent secret or in the runtime's environment") {
		t.Fatalf("set before the url is set = %+v, %v; want an error result saying how to set DESK_DB", res, err)
	}

	path := filepath.Join(t.TempDir(), "desk.db")
	mu.Lock()
	env["DESK_DB"] = path
	mu.Unlock()
	var wg sync.WaitGroup
	for range 4 { // concurrent first uses open the database once
		wg.Go(func() {
			if res, err := set.Call(ctx, tools.Call{ID: "c2", Arguments: json.RawMessage(`{"id":"n1","text":"hi"}`)}); err != nil || res.IsError {
				t.Errorf("set once the url is set = %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if rec, err := recs.Get(ctx, "notes", "n1"); err != nil || rec.Version != 4 {
		t.Fatalf("Get = %+v, %v; want version 4", rec, err)
	}
	before := lookups
	if _, err := recs.Get(ctx, "notes", "n1"); err != nil || lookups != before {
		t.Errorf("a use after the database opened resolved the url again (%d lookups, %v)", lookups-before, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database file: %v", err)
	}
	if _, err := recs.Get(ctx, "notes", "n1"); err == nil {
		t.Error("Get after Close succeeded")
	}
}

// noteStore is a store of notes keyed by id.
func noteStore() *agent.Store {
	return &agent.Store{Name: "notes", Entity: agent.StoreEntity{Name: "Note", Key: "{id}", Schema: map[string]agent.StoreField{
		"id": {Type: "string"}, "text": {Type: "string"},
	}}}
}
