package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
	"svc/registry"
)

// TestRevocationsRefuseTokensOfRevokedMinters: a runtime token works while the pk_ token that
// minted it does, and is refused (ErrMinterRevoked) after that token is revoked and the list is
// refreshed; tokens minted by others, or with no minter, are unaffected.
func TestRevocationsRefuseTokensOfRevokedMinters(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		tokens := registry.NewTokens(db)
		signer, err := auth.NewSigner([]byte(strings.Repeat("k", 32)))
		if err != nil {
			t.Fatal(err)
		}
		minter, _, err := tokens.Create(ctx, "ci", auth.Operator, "a1")
		if err != nil {
			t.Fatal(err)
		}
		other, _, err := tokens.Create(ctx, "other", auth.Operator, "a1")
		if err != nil {
			t.Fatal(err)
		}
		mint := func(by string) string {
			tok, err := signer.Mint(auth.RuntimeClaims{AgentID: "a1", ExpiresAt: time.Now().Add(time.Hour), MintedBy: by})
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		mine, theirs, legacy := mint(minter.ID), mint(other.ID), mint("")
		r := auth.NewRevocations(signer, tokens, 10*time.Millisecond, nil)
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if c, err := r.Verify(mine); err != nil || c.MintedBy != minter.ID {
			t.Fatalf("Verify before revocation = %+v, %v", c, err)
		}
		if err := tokens.Revoke(ctx, minter.ID); err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := r.Run(runCtx); err != nil {
				t.Errorf("Run = %v", err)
			}
		})
		defer func() { cancel(); wg.Wait() }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := r.Verify(mine)
			if errors.Is(err, auth.ErrMinterRevoked) && errors.Is(err, auth.ErrUnauthenticated) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Verify after revocation = %v, want ErrMinterRevoked", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		for name, tok := range map[string]string{"another minter's": theirs, "a minter-less": legacy} {
			if _, err := r.Verify(tok); err != nil {
				t.Errorf("Verify(%s token) = %v", name, err)
			}
		}
	})
}
