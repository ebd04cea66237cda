package auth

import (
	"crypto/subtle"
	"fmt"
	"strings"
)

// Principal is who made a platform API call.
type Principal struct {
	TokenID string
	Name    string
	Kind    Kind
	AgentID string // the agent binding; "" for an unbound token
}

// Can reports whether p may make a call that needs kind need on agentID ("" for calls that concern no single agent).
// A bound token may act only on its own agent, and never on calls that concern no agent unless need is Observer.
func (p Principal) Can(need Kind, agentID string) error {
	if !p.Kind.Allows(need) {
		return fmt.Errorf("%w: needs a %s token, this one is %s", ErrForbidden, need, p.Kind)
	}
	if p.AgentID != "" && agentID != p.AgentID {
		return fmt.Errorf("%w: token is bound to another agent", ErrForbidden)
	}
	return nil
}

// CheckBootstrap reports whether value may be made a token as it is (the bootstrap admin token
// of SVC_BOOTSTRAP_ADMIN_TOKEN): a pk_ value with at least 16 more characters.
func CheckBootstrap(value string) error {
	if !strings.HasPrefix(value, PlatformPrefix) || len(value) < len(PlatformPrefix)+16 {
		return fmt.Errorf("bootstrap token must start with %q and carry at least 16 more characters", PlatformPrefix)
	}
	return nil
}

// Stored is what a credential store keeps of a pk_ token or an ak_ key and Check reads: its hash
// and whether it was revoked.
type Stored struct {
	Hash    string
	Revoked bool
}

// Check verifies value against the credential s that a store found by Hash(value): nil when s
// is that value's, unrevoked, and ErrUnauthenticated otherwise. The comparison takes constant
// time.
func (s Stored) Check(value string) error {
	if subtle.ConstantTimeCompare([]byte(s.Hash), []byte(Hash(value))) != 1 || s.Revoked {
		return ErrUnauthenticated
	}
	return nil
}
