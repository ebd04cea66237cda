package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"strings"
)

// Errors callers branch on.
var (
	// ErrUnauthenticated means a credential is missing, unknown, revoked, expired or of the wrong family.
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	// ErrExpired is wrapped, with ErrUnauthenticated, by the error of a runtime token past its expiry.
	ErrExpired = errors.New("auth: runtime token expired")
	// ErrMinterRevoked is wrapped, with ErrUnauthenticated, by the error of a runtime token whose
	// minting pk_ token was revoked.
	ErrMinterRevoked = errors.New("auth: the token that minted this runtime token was revoked")
	// ErrForbidden means the credential is valid but its kind or agent binding does not allow the call.
	ErrForbidden = errors.New("auth: forbidden")
	// ErrInvalidKind is returned for a token kind that is not observer, operator or admin.
	ErrInvalidKind = errors.New("auth: invalid token kind")
	// ErrNotFound is returned when revoking a token that does not exist.
	ErrNotFound = errors.New("auth: token not found")
)

// Credential prefixes.
const (
	PlatformPrefix = "pk_"
	AgentKeyPrefix = "ak_"
)

// Kind is the kind of an automation token. Kinds are ordered: an admin token may do what an
// operator token may, and an operator token what an observer token may.
type Kind string

// The automation token kinds of spec table 2.4.
const (
	Observer Kind = "observer"
	Operator Kind = "operator"
	Admin    Kind = "admin"
)

func (k Kind) rank() int {
	switch k {
	case Observer:
		return 1
	case Operator:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k.rank() > 0 }

// Allows reports whether a token of kind k may make a call that needs kind need.
func (k Kind) Allows(need Kind) bool { return k.Valid() && k.rank() >= need.rank() }

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns prefix followed by 16 lowercase base32 characters (80 random bits): a DNS-label-safe identifier.
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return prefix + idEncoding.EncodeToString(b[:])
}

// NewSecret returns a new credential value of the family prefix (PlatformPrefix or
// AgentKeyPrefix): prefix followed by 256 random bits. Only Hash(value) is stored; the value is
// shown once.
func NewSecret(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return prefix + idEncoding.EncodeToString(b[:])
}

// Hash is the stored form of a pk_ or ak_ value: hex SHA-256.
func Hash(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])
}

// Bearer extracts the token of an "Authorization: Bearer <token>" header value; "" when absent or malformed.
func Bearer(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
