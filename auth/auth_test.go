package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"svc/auth"
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
