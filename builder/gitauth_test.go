package builder

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/migrations/dbtest"
	"svc/registry"
)

// TestCredentials resolves env: references from an agent's secrets first, then the environment.
func TestCredentials(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	cipher, err := registry.NewCipher([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := registry.NewAgents(db).Create(ctx, "creds", "")
	if err != nil {
		t.Fatal(err)
	}
	secrets := registry.NewSecrets(db, cipher)
	if err := secrets.Put(ctx, a.ID, "GIT_TOKEN", "bot:from-secret"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GIT_TOKEN": "from-env", "ONLY_ENV": "tok"}
	c := Credentials{Secrets: secrets, Getenv: func(name string) (string, bool) { v, ok := env[name]; return v, ok }}

	tests := []struct {
		ref     string
		want    *GitAuth
		wantErr string
	}{
		{"", nil, ""},
		{"env:GIT_TOKEN", &GitAuth{Username: "bot", Password: "from-secret"}, ""}, // the secret wins
		{"env:ONLY_ENV", &GitAuth{Username: "x-access-token", Password: "tok"}, ""},
		{"env:MISSING", nil, "MISSING is neither an agent secret nor set in the environment"},
		{"GIT_TOKEN", nil, "must be an env: reference"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := c.GitAuth(ctx, a.ID, tt.ref)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("GitAuth(%q) error = %v, want %q", tt.ref, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GitAuth(%q) (-want +got):\n%s", tt.ref, diff)
			}
		})
	}
	// The zero value reads the environment only.
	if _, err := (Credentials{Getenv: c.Getenv}).GitAuth(ctx, a.ID, "env:ONLY_ENV"); err != nil {
		t.Errorf("without secrets: %v", err)
	}

	// IsSet: a secret or a variable that is not empty; an empty value counts as unset, as a
	// runtime counts it, and an empty secret hides the variable as it does there.
	env["EMPTY_ENV"] = ""
	env["HIDDEN"] = "from-env"
	if err := secrets.Put(ctx, a.ID, "HIDDEN", ""); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"GIT_TOKEN": true, "ONLY_ENV": true, "MISSING": false, "EMPTY_ENV": false, "HIDDEN": false} {
		if got, err := c.IsSet(ctx, a.ID, name); got != want || err != nil {
			t.Errorf("IsSet(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
}
