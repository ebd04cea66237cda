package builder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"svc/registry"
)

// GitAuth is HTTP basic authentication for a git host. Hosts that take a token (GitHub, GitLab,
// Gitea) accept it as the password with any non-empty user name.
type GitAuth struct {
	Username string
	Password string
}

// String hides the password, so credentials never reach a log by accident.
func (a *GitAuth) String() string {
	if a == nil {
		return "<nil>"
	}
	return a.Username + ":***"
}

// Secrets looks up an agent's secrets by name; registry.Secrets implements it. ok is false when
// the agent has no secret of that name.
type Secrets interface {
	Resolve(ctx context.Context, agentID, name string) (value string, ok bool, err error)
}

var _ Secrets = (*registry.Secrets)(nil)

// Credentials resolves the credentials reference of an agent's git source into a GitAuth. A
// reference is "env:NAME": NAME is looked up among the agent's secrets first, then in the process
// environment; its value is "user:token", or a token alone (sent with the user name
// x-access-token, which GitHub, GitLab and Gitea accept). Values are read at each call and kept
// nowhere. The zero value reads the process environment only.
type Credentials struct {
	// Secrets holds the agents' secrets; nil looks in the environment only.
	Secrets Secrets
	// Getenv reads the process environment; nil means os.LookupEnv.
	Getenv func(name string) (string, bool)
}

// GitAuth resolves ref for agentID: nil for "" (no credentials), else the GitAuth its value gives.
// A reference that is not "env:NAME", or whose NAME is neither an agent secret nor set in the
// environment, is an error that names it (never its value).
func (c Credentials) GitAuth(ctx context.Context, agentID, ref string) (*GitAuth, error) {
	if ref == "" {
		return nil, nil
	}
	v, err := c.resolve(ctx, agentID, ref)
	if err != nil {
		return nil, err
	}
	if user, pass, ok := strings.Cut(v, ":"); ok {
		return &GitAuth{Username: user, Password: pass}, nil
	}
	return &GitAuth{Username: "x-access-token", Password: v}, nil
}

// resolve reads an env: reference from the agent's secrets, then the process environment.
func (c Credentials) resolve(ctx context.Context, agentID, ref string) (string, error) {
	name, ok := strings.CutPrefix(ref, "env:")
	if !ok {
		return "", errors.New("credentials must be an env: reference")
	}
	v, ok, err := c.lookup(ctx, agentID, name)
	if err != nil {
		return "", err
	}
	if ok {
		return v, nil
	}
	return "", fmt.Errorf("credentials: %s is neither an agent secret nor set in the environment", name)
}

// IsSet reports whether the variable name resolves for agentID to a value that is not empty:
// an agent secret, else the process environment, as a runtime resolves an env: reference (an
// empty value counts as unset there). A build asks it for every reference of the agent.
func (c Credentials) IsSet(ctx context.Context, agentID, name string) (bool, error) {
	v, ok, err := c.lookup(ctx, agentID, name)
	return ok && v != "", err
}

// lookup finds name among agentID's secrets, then in the process environment.
func (c Credentials) lookup(ctx context.Context, agentID, name string) (string, bool, error) {
	if c.Secrets != nil {
		v, ok, err := c.Secrets.Resolve(ctx, agentID, name)
		if err != nil {
			return "", false, err
		}
		if ok {
			return v, true, nil
		}
	}
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	v, ok := getenv(name)
	return v, ok, nil
}
