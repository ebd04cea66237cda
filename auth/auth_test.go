package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
)

func TestKindOrder(t *testing.T) {
	tests := []struct {
		have, need auth.Kind
		want       bool
	}{
		{auth.Observer, auth.Observer, true},
		{auth.Observer, auth.Operator, false},
		{auth.Operator, auth.Observer, true},
		{auth.Operator, auth.Admin, false},
		{auth.Admin, auth.Operator, true},
		{auth.Kind("root"), auth.Observer, false},
	}
	for _, tt := range tests {
		if got := tt.have.Allows(tt.need); got != tt.want {
			t.Errorf("%s.Allows(%s) = %v, want %v", tt.have, tt.need, got, tt.want)
		}
	}
}

func TestNewIDIsDNSLabel(t *testing.T) {
	id := auth.NewID("d")
	if len(id) != 17 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		t.Fatalf("NewID(d) = %q, want d + 16 lowercase base32 characters", id)
	}
}

func TestBearer(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "abc": "", "": ""} {
		if got := auth.Bearer(in); got != want {
			t.Errorf("Bearer(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTokens(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := auth.NewTokens(db)
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

func TestAPIKeys(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	if err := db.Exec(`INSERT INTO agents (id, slug, name, created_at, updated_at) VALUES ('a1','a1','A',?,?)`, time.Now(), time.Now()).Error; err != nil {
		t.Fatal(err)
	}
	keys := auth.NewAPIKeys(db)
	k, value, err := keys.Create(ctx, "a1", "backend")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(value, "ak_") {
		t.Fatalf("key = %q, want ak_ prefix", value)
	}
	got, err := keys.Authenticate(ctx, value)
	if err != nil || got.ID != k.ID {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}
	// An agent key is never a platform token.
	if _, err := auth.NewTokens(db).Authenticate(ctx, value); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("ak_ as platform token = %v, want ErrUnauthenticated", err)
	}
}

func TestRuntimeTokens(t *testing.T) {
	s, err := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	tok, err := s.Mint(auth.RuntimeClaims{UserID: "u1", AgentID: "a1", ScopeID: "tenant-7", ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.UserID != "u1" || c.AgentID != "a1" || c.ScopeID != "tenant-7" || !c.ExpiresAt.Equal(exp) {
		t.Fatalf("claims = %+v", c)
	}
	expired, err := s.Mint(auth.RuntimeClaims{AgentID: "a1", ExpiresAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := auth.NewSigner([]byte(strings.Repeat("o", 32)))
	forged, err := other.Mint(auth.RuntimeClaims{AgentID: "a1", ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	// alg=none token for agent a1.
	none := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJhZ2VudCI6ImExIiwiZXhwIjo0MTAyNDQ0ODAwfQ."
	for name, bad := range map[string]string{"expired": expired, "forged": forged, "none": none, "pk": "pk_abc", "empty": ""} {
		if _, err := s.Verify(bad); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("Verify(%s) = %v, want ErrUnauthenticated", name, err)
		}
	}
	// A genuine expired token says so; a forged one, expired or not, does not.
	if _, err := s.Verify(expired); !errors.Is(err, auth.ErrExpired) {
		t.Errorf("Verify(expired) = %v, want ErrExpired", err)
	}
	forgedExpired, err := other.Mint(auth.RuntimeClaims{AgentID: "a1", ExpiresAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(forgedExpired); !errors.Is(err, auth.ErrUnauthenticated) || errors.Is(err, auth.ErrExpired) {
		t.Errorf("Verify(forged, expired) = %v, want ErrUnauthenticated without ErrExpired", err)
	}
	if _, err := auth.NewSigner([]byte("short")); err == nil {
		t.Error("NewSigner(short key) succeeded")
	}
	if _, err := s.Mint(auth.RuntimeClaims{ExpiresAt: exp}); err == nil {
		t.Error("Mint without agent succeeded")
	}
}

func BenchmarkVerifyRuntimeToken(b *testing.B) {
	s, _ := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	tok, _ := s.Mint(auth.RuntimeClaims{UserID: "u1", AgentID: "a1", ExpiresAt: time.Now().Add(time.Hour)})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
