package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/registry"
)

func TestTokens(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewTokens(db)
		tok, value, err := s.Create(ctx, "ci", auth.Operator, "a1")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(value, "pk_") || tok.Hash == value || strings.Contains(tok.Hash, value) {
			t.Fatalf("token value %q / hash %q: want pk_ value stored only as a hash", value, tok.Hash)
		}
		p, err := s.Authenticate(ctx, value)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != auth.Operator || p.AgentID != "a1" || p.TokenID != tok.ID {
			t.Fatalf("principal = %+v", p)
		}
		if err := p.Can(auth.Operator, "a1"); err != nil {
			t.Errorf("Can(operator, own agent) = %v", err)
		}
		if err := p.Can(auth.Operator, "a2"); !errors.Is(err, auth.ErrForbidden) {
			t.Errorf("Can(operator, other agent) = %v, want ErrForbidden", err)
		}
		if err := p.Can(auth.Admin, "a1"); !errors.Is(err, auth.ErrForbidden) {
			t.Errorf("Can(admin) = %v, want ErrForbidden", err)
		}
		for _, bad := range []string{"", "pk_nope", "ak_" + value[3:], value + "x"} {
			if _, err := s.Authenticate(ctx, bad); !errors.Is(err, auth.ErrUnauthenticated) {
				t.Errorf("Authenticate(%q) = %v, want ErrUnauthenticated", bad, err)
			}
		}
		if _, _, err := s.Create(ctx, "x", auth.Kind("root"), ""); !errors.Is(err, auth.ErrInvalidKind) {
			t.Errorf("Create(kind root) = %v, want ErrInvalidKind", err)
		}
		if err := s.Revoke(ctx, tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, value); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("Authenticate(revoked) = %v, want ErrUnauthenticated", err)
		}
		if err := s.Revoke(ctx, tok.ID); !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("Revoke twice = %v, want ErrNotFound", err)
		}

		boot := "pk_bootstrap_value_0123456789"
		for range 2 {
			if err := s.Ensure(ctx, "bootstrap", auth.Admin, boot); err != nil {
				t.Fatal(err)
			}
		}
		if p, err := s.Authenticate(ctx, boot); err != nil || p.Kind != auth.Admin {
			t.Fatalf("bootstrap token: %+v, %v", p, err)
		}
		if err := s.Ensure(ctx, "bootstrap", auth.Admin, "short"); err == nil {
			t.Error("Ensure(short value) succeeded, want error")
		}
	})
}

// Bootstrap creates a first admin token only where there is no token at all, and makes a
// configured value an admin token at every start.
func TestTokensBootstrap(t *testing.T) {
	ctx := context.Background()
	s := registry.NewTokens(dbtest.SQLite(t))
	first, err := s.Bootstrap(ctx, "")
	if err != nil || !strings.HasPrefix(first, "pk_") {
		t.Fatalf("Bootstrap on no tokens = %q, %v; want a pk_ value", first, err)
	}
	if p, err := s.Authenticate(ctx, first); err != nil || p.Kind != auth.Admin {
		t.Fatalf("first admin token: %+v, %v", p, err)
	}
	if again, err := s.Bootstrap(ctx, ""); err != nil || again != "" {
		t.Fatalf("Bootstrap with a token = %q, %v; want none created", again, err)
	}
	boot := "pk_bootstrap_value_0123456789"
	if created, err := s.Bootstrap(ctx, boot); err != nil || created != "" {
		t.Fatalf("Bootstrap(configured) = %q, %v", created, err)
	}
	if p, err := s.Authenticate(ctx, boot); err != nil || p.Kind != auth.Admin {
		t.Fatalf("configured admin token: %+v, %v", p, err)
	}
	if _, err := s.Bootstrap(ctx, "short"); err == nil {
		t.Error("Bootstrap(short value) succeeded, want error")
	}
}
