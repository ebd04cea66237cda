package api

import (
	"context"
	"errors"
	"strings"

	"github.com/gin-gonic/gin"

	"svc/auth"
	"svc/errcode"
	"svc/registry"
)

// Context keys of the authenticated caller and the agent of an agent route.
type (
	principalKey struct{}
	agentKey     struct{}
)

// PrincipalFrom returns the caller of an authenticated platform route. Inside a handler pass the
// *gin.Context itself (it reads the request context) or c.Request.Context(). For I/O always pass
// c.Request.Context(), never c: gin recycles its Context once the handler returns, while
// database/sql may still read the ctx it was given.
func PrincipalFrom(ctx context.Context) (auth.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(auth.Principal)
	return p, ok
}

// AgentFrom returns the agent of a route declared with Agent: true, loaded (and its binding
// checked) before the handler ran.
func AgentFrom(ctx context.Context) (registry.Agent, bool) {
	ag, ok := ctx.Value(agentKey{}).(registry.Agent)
	return ag, ok
}

// authenticate is the middleware of every non-public route: a pk_ token (401 otherwise) of at
// least kind need (403), and for agent routes bound to the agent of ":id" (403) which must
// exist (404). ":id" is the agent's id or its slug (allowAgent). 401 comes before 403, and a
// bound token gets the same 403 for any other agent, existing or not, so it learns nothing
// about other agents.
func (a *API) authenticate(need auth.Kind, agentRoute bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := a.authorizeRequest(c, need, agentRoute); err != nil {
			a.writeError(c, err)
			c.Abort()
			return
		}
		c.Next()
	}
}

func (a *API) authorizeRequest(c *gin.Context, need auth.Kind, agentRoute bool) error {
	ctx := c.Request.Context()
	p, err := a.principal(ctx, c.GetHeader("Authorization"))
	if err != nil {
		return err
	}
	ctx = context.WithValue(ctx, principalKey{}, p)
	c.Request = c.Request.WithContext(ctx)
	if !p.Kind.Allows(need) {
		return Errorf(errcode.Forbidden, "this call needs a token of kind %s or higher; this token is %s", need, p.Kind)
	}
	if !agentRoute {
		return nil
	}
	ag, err := a.allowAgent(ctx, p, c.Param("id"))
	if err != nil {
		return err
	}
	c.Request = c.Request.WithContext(context.WithValue(ctx, agentKey{}, ag))
	return nil
}

// principal authenticates the Authorization header. Only pk_ automation tokens are platform
// credentials; each other family is named in the error so the caller knows what went wrong: 403
// for an ak_ agent key (a credential that can never call the platform), 401 for the rest.
func (a *API) principal(ctx context.Context, header string) (auth.Principal, error) {
	token := auth.Bearer(header)
	switch {
	case header == "":
		return auth.Principal{}, Errorf(errcode.Unauthenticated, "missing Authorization header; send \"Authorization: Bearer pk_...\"")
	case token == "":
		return auth.Principal{}, Errorf(errcode.Unauthenticated, "the Authorization header must be \"Bearer <token>\"")
	case strings.HasPrefix(token, auth.AgentKeyPrefix):
		// An agent key authenticates its agent's runtime only: whatever its value, it may never
		// call the platform (CONTRACT §8), so it is refused without a look-up.
		return auth.Principal{}, Errorf(errcode.Forbidden, "an agent API key (ak_) calls its agent's runtime only, never the platform API; use a pk_ automation token")
	case !strings.HasPrefix(token, auth.PlatformPrefix) && strings.Count(token, ".") == 2:
		return auth.Principal{}, Errorf(errcode.Unauthenticated, "a runtime token cannot call the platform API; use a pk_ automation token")
	case !strings.HasPrefix(token, auth.PlatformPrefix):
		return auth.Principal{}, Errorf(errcode.Unauthenticated, "not a platform token; use a pk_ automation token")
	}
	p, err := a.deps.Tokens.Authenticate(ctx, token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return auth.Principal{}, Errorf(errcode.Unauthenticated, "unknown or revoked token")
	}
	if err != nil {
		return auth.Principal{}, err
	}
	return p, nil
}

// allowAgent is the one way a request names an agent (":id" of an agent route, agentId of a
// body, ?agent= of a webhook): ref is the agent's id or its slug (registry.Agents.Resolve; the
// two cannot collide). It loads the agent and checks that p may act on it (its binding): an
// unknown agent is NOT_FOUND, but for a token bound to an agent every other ref, an existing
// agent's or not, is the same FORBIDDEN, so a bound token learns nothing about other agents.
func (a *API) allowAgent(ctx context.Context, p auth.Principal, ref string) (registry.Agent, error) {
	bound := p.AgentID != ""
	ag, err := a.agents.Resolve(ctx, ref)
	switch {
	case err != nil && !errors.Is(err, registry.ErrAgentNotFound):
		return registry.Agent{}, err
	case bound && (err != nil || ag.ID != p.AgentID):
		return registry.Agent{}, Errorf(errcode.Forbidden, "this token is bound to another agent")
	case err != nil:
		return registry.Agent{}, Errorf(errcode.NotFound, "no agent has the id or slug %q", ref)
	}
	return ag, nil
}

// authorizeAgent is for handlers of routes whose agent is known only after a look-up (a
// deployment's or a build's): it applies the agent binding of the caller to agentID and loads
// the agent, with the statuses of Route.Agent (403 bound elsewhere, 404 unknown). The token
// kind was checked by the route's Need already.
func (a *API) authorizeAgent(c *gin.Context, agentID string) (registry.Agent, error) {
	p, ok := PrincipalFrom(c)
	if !ok {
		return registry.Agent{}, &Error{Code: errcode.Internal, Cause: errors.New("authorizeAgent on a public route")}
	}
	return a.allowAgent(c.Request.Context(), p, agentID)
}

// principalOf returns the caller of a non-public route (the middleware guarantees one).
func principalOf(c *gin.Context) auth.Principal {
	p, _ := PrincipalFrom(c)
	return p
}

// agentOf returns the agent of an Agent route (the middleware guarantees one).
func agentOf(c *gin.Context) registry.Agent {
	ag, _ := AgentFrom(c)
	return ag
}
