package auth

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// DefaultRevocationRefresh is how often a Revocations reads the revoked tokens: the longest a
// runtime token outlives the revocation of the pk_ token that minted it.
const DefaultRevocationRefresh = 2 * time.Second

// Revocations verifies runtime tokens like its Signer and also refuses those minted by a pk_
// token that has been revoked. Runtime tokens are checked without a database look-up per request:
// the ids of tokens revoked within MaxRuntimeTTL (older revocations cannot matter, every token
// they minted has expired) are read every refresh interval by Run and kept in memory. A
// Revocations is safe for concurrent use.
type Revocations struct {
	signer   *Signer
	tokens   RevokedLister
	interval time.Duration
	log      *slog.Logger

	mu      sync.RWMutex
	revoked map[string]bool
}

// RevokedLister lists the automation tokens revoked lately: registry.Tokens. RevokedSince returns
// the ids of the tokens revoked at or after since, or an error when it cannot read them (ctx
// done, say). It must be safe for concurrent use.
type RevokedLister interface {
	RevokedSince(ctx context.Context, since time.Time) ([]string, error)
}

// NewRevocations returns a verifier over signer and the revoked tokens of tokens that refreshes
// every interval (DefaultRevocationRefresh when 0). Call Refresh once before serving and Run for
// the rest.
func NewRevocations(signer *Signer, tokens RevokedLister, interval time.Duration, log *slog.Logger) *Revocations {
	if interval <= 0 {
		interval = DefaultRevocationRefresh
	}
	if log == nil {
		log = slog.Default()
	}
	return &Revocations{signer: signer, tokens: tokens, interval: interval, log: log, revoked: map[string]bool{}}
}

// Refresh reads the tokens revoked within MaxRuntimeTTL.
func (r *Revocations) Refresh(ctx context.Context) error {
	ids, err := r.tokens.RevokedSince(ctx, time.Now().Add(-MaxRuntimeTTL-time.Minute))
	if err != nil {
		return err
	}
	revoked := make(map[string]bool, len(ids))
	for _, id := range ids {
		revoked[id] = true
	}
	r.mu.Lock()
	r.revoked = revoked
	r.mu.Unlock()
	return nil
}

// Run refreshes every interval until ctx is done; a failed refresh keeps the last list and is
// logged. It returns nil when ctx ends.
func (r *Revocations) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "refresh revoked tokens", "err", err)
			}
		}
	}
}

// Verify is Signer.Verify, and ErrMinterRevoked (with ErrUnauthenticated) for a token whose
// minting token is revoked.
func (r *Revocations) Verify(token string) (RuntimeClaims, error) {
	c, err := r.signer.Verify(token)
	if err != nil {
		return c, err
	}
	r.mu.RLock()
	revoked := c.MintedBy != "" && r.revoked[c.MintedBy]
	r.mu.RUnlock()
	if revoked {
		return RuntimeClaims{}, fmt.Errorf("%w: %w (%s)", ErrUnauthenticated, ErrMinterRevoked, c.MintedBy)
	}
	return c, nil
}
