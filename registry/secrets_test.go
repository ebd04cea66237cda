package registry_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

// testCipher returns a cipher with a fixed key made of b.
func testCipher(t *testing.T, b byte) *registry.Cipher {
	t.Helper()
	c, err := registry.NewCipher(bytes.Repeat([]byte{b}, registry.SecretKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCipher(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := registry.NewCipher(make([]byte, n)); err == nil {
			t.Errorf("NewCipher(%d bytes) succeeded, want an error", n)
		}
	}
	c := testCipher(t, 1)
	sealed := c.Seal([]byte("hunter2"), "ctx-a")
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("sealed bytes contain the plaintext")
	}
	if again := c.Seal([]byte("hunter2"), "ctx-a"); bytes.Equal(again, sealed) {
		t.Error("two seals of the same value are equal; the nonce must be random")
	}
	got, err := c.Open(sealed, "ctx-a")
	if err != nil || string(got) != "hunter2" {
		t.Errorf("Open = %q, %v; want hunter2", got, err)
	}
	if _, err := c.Open(sealed, "ctx-b"); !errors.Is(err, registry.ErrDecrypt) {
		t.Errorf("Open with another context = %v, want ErrDecrypt", err)
	}
	if _, err := testCipher(t, 2).Open(sealed, "ctx-a"); !errors.Is(err, registry.ErrDecrypt) {
		t.Errorf("Open with another key = %v, want ErrDecrypt", err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, err := c.Open(tampered, "ctx-a"); !errors.Is(err, registry.ErrDecrypt) {
		t.Errorf("Open of tampered bytes = %v, want ErrDecrypt", err)
	}
	for _, short := range [][]byte{nil, {1}, sealed[:20]} {
		if _, err := c.Open(short, "ctx-a"); !errors.Is(err, registry.ErrDecrypt) {
			t.Errorf("Open(%d bytes) = %v, want ErrDecrypt", len(short), err)
		}
	}
}

func TestValidateSecretName(t *testing.T) {
	for name, ok := range map[string]bool{
		"OPENAI_API_KEY": true, "_X": true, "A1": true, strings.Repeat("A", registry.MaxSecretName): true,
		"": false, "1A": false, "lower": false, "A-B": false, "A B": false, strings.Repeat("A", registry.MaxSecretName+1): false,
	} {
		if err := registry.ValidateSecretName(name); (err == nil) != ok {
			t.Errorf("ValidateSecretName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestSecrets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewSecrets(db, testCipher(t, 7))
		a := mustCreateAgent(t, db, "one")
		b := mustCreateAgent(t, db, "two")

		if _, ok, err := s.Resolve(ctx, a.ID, "API_KEY"); ok || err != nil {
			t.Fatalf("Resolve before Put = ok %v, %v; want not found", ok, err)
		}
		if err := s.Put(ctx, a.ID, "API_KEY", "v1-secret"); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, a.ID, "API_KEY", "v2-secret"); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, a.ID, "EMPTY", ""); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := s.Resolve(ctx, a.ID, "API_KEY"); v != "v2-secret" || !ok || err != nil {
			t.Errorf("Resolve = %q, %v, %v; want v2-secret", v, ok, err)
		}
		if v, ok, err := s.Resolve(ctx, a.ID, "EMPTY"); v != "" || !ok || err != nil {
			t.Errorf("Resolve(EMPTY) = %q, %v, %v; want empty and found", v, ok, err)
		}
		if _, ok, err := s.Resolve(ctx, b.ID, "API_KEY"); ok || err != nil {
			t.Errorf("Resolve on another agent = ok %v, %v; want not found", ok, err)
		}
		list, err := s.List(ctx, a.ID)
		if err != nil || len(list) != 2 || list[0].Name != "API_KEY" || list[1].Name != "EMPTY" ||
			time.Since(list[0].UpdatedAt) > time.Minute || list[0].UpdatedAt.Location() != time.UTC {
			t.Errorf("List = %+v, %v; want API_KEY and EMPTY, set just now", list, err)
		}
		if list, err := s.List(ctx, b.ID); err != nil || len(list) != 0 {
			t.Errorf("List of another agent = %+v, %v; want none", list, err)
		}

		// At rest the value is sealed.
		var raw []byte
		if err := db.Raw("SELECT ciphertext FROM secrets WHERE agent_id = ? AND name = ?", a.ID, "API_KEY").Row().Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("v2-secret")) {
			t.Error("the database holds the secret in clear")
		}
		// A row moved to another agent does not open.
		if err := db.Exec("INSERT INTO secrets (agent_id, name, ciphertext, updated_at) SELECT ?, name, ciphertext, updated_at FROM secrets WHERE agent_id = ? AND name = ?", b.ID, a.ID, "API_KEY").Error; err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Resolve(ctx, b.ID, "API_KEY"); !errors.Is(err, registry.ErrDecrypt) {
			t.Errorf("Resolve of a moved row = %v, want ErrDecrypt", err)
		}
		// Another key cannot read it.
		if _, _, err := registry.NewSecrets(db, testCipher(t, 8)).Resolve(ctx, a.ID, "API_KEY"); !errors.Is(err, registry.ErrDecrypt) {
			t.Errorf("Resolve with another key = %v, want ErrDecrypt", err)
		}

		if err := s.Put(ctx, a.ID, "bad-name", "x"); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("Put(bad name) = %v, want ErrInvalid", err)
		}
		if err := s.Put(ctx, a.ID, "BIG", strings.Repeat("x", registry.MaxSecretSize)); err != nil {
			t.Errorf("Put at the size limit = %v", err)
		}
		var ie *registry.InvalidError
		if err := s.Put(ctx, a.ID, "BIG", strings.Repeat("x", registry.MaxSecretSize+1)); !errors.As(err, &ie) || ie.Field != "value" {
			t.Errorf("Put over the size limit = %v, want an InvalidError for value", err)
		}
		if err := s.Put(ctx, "anosuchagent", "X", "x"); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("Put for a missing agent = %v, want ErrAgentNotFound", err)
		}
		if deleted, err := s.Delete(ctx, a.ID, "API_KEY"); !deleted || err != nil {
			t.Fatalf("Delete = %v, %v", deleted, err)
		}
		if _, ok, _ := s.Resolve(ctx, a.ID, "API_KEY"); ok {
			t.Error("Resolve after Delete found the secret")
		}
		if deleted, err := s.Delete(ctx, a.ID, "API_KEY"); deleted || err != nil {
			t.Errorf("Delete of a missing secret = %v, %v; want false, nil", deleted, err)
		}
	})
}
