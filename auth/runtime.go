package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Runtime token bounds (CONTRACT §3): ttl in seconds.
const (
	DefaultRuntimeTTL = time.Hour
	MinRuntimeTTL     = time.Minute
	MaxRuntimeTTL     = 24 * time.Hour
)

// RuntimeClaims are what a runtime token says about its bearer.
type RuntimeClaims struct {
	UserID    string    // verified user id; "" for a service caller
	AgentID   string    // the agent the token is for
	ScopeID   string    // "" when the token carries no scope claim
	ExpiresAt time.Time // whole seconds
	// MintedBy is the id of the pk_ token that minted it ("" for tokens minted before the claim
	// existed); a Revocations refuses the runtime token once that token is revoked.
	MintedBy string
}

type jwtClaims struct {
	Agent   string `json:"agent"`
	ScopeID string `json:"scope_id,omitempty"`
	Mint    string `json:"mint,omitempty"`
	jwt.RegisteredClaims
}

// Signer mints and verifies runtime tokens (HS256 JWTs). Verification needs no database.
// A Signer is safe for concurrent use.
type Signer struct {
	key    []byte
	parser *jwt.Parser
}

// NewSigner returns a signer with key, which must hold at least 32 bytes.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("auth: signing key must hold at least 32 bytes")
	}
	return &Signer{
		key:    append([]byte(nil), key...),
		parser: jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(), jwt.WithLeeway(5*time.Second)),
	}, nil
}

// Mint signs a runtime token for c; c.ExpiresAt must be in the future.
func (s *Signer) Mint(c RuntimeClaims) (string, error) {
	if c.AgentID == "" {
		return "", errors.New("auth: runtime token needs an agent")
	}
	claims := jwtClaims{
		Agent:   c.AgentID,
		ScopeID: c.ScopeID,
		Mint:    c.MintedBy,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   c.UserID,
			ExpiresAt: jwt.NewNumericDate(c.ExpiresAt),
			IssuedAt:  jwt.NewNumericDate(time.Now()),
		},
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.key)
	if err != nil {
		return "", fmt.Errorf("mint runtime token: %w", err)
	}
	return tok, nil
}

// ExpiredError is a genuine runtime token past its expiry; it matches ErrExpired.
type ExpiredError struct{ At time.Time }

func (e *ExpiredError) Error() string { return "runtime token expired at " + e.At.Format(time.RFC3339) }

// Unwrap returns ErrExpired.
func (e *ExpiredError) Unwrap() error { return ErrExpired }

// Verify checks a runtime token's signature and expiry and returns its claims. Every failure is
// ErrUnauthenticated (wrapping the reason); a token that is genuine but past its expiry also
// wraps ErrExpired. A pk_ or ak_ value is never a runtime token.
func (s *Signer) Verify(token string) (RuntimeClaims, error) {
	var c jwtClaims
	_, err := s.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.key, nil })
	if errors.Is(err, jwt.ErrTokenExpired) && c.ExpiresAt != nil {
		return RuntimeClaims{}, fmt.Errorf("%w: %w", ErrUnauthenticated, &ExpiredError{At: c.ExpiresAt.UTC()})
	}
	if err != nil {
		return RuntimeClaims{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	if c.Agent == "" {
		return RuntimeClaims{}, fmt.Errorf("%w: token names no agent", ErrUnauthenticated)
	}
	return RuntimeClaims{UserID: c.Subject, AgentID: c.Agent, ScopeID: c.ScopeID, ExpiresAt: c.ExpiresAt.Time, MintedBy: c.Mint}, nil
}
