package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"svc/client"
)

// agentFlags are the flags of the commands that call an agent's runtime (svc chat, svc
// automations): where the runtime is, and which credential to send it.
type agentFlags struct {
	r                                        remote
	appsDomain, deployID, runtimeURL, apiKey string
}

// bind declares the platform flags (--url, --token, --agent) and --apps-domain, --deployment,
// --api-key and --runtime on cmd.
func (f *agentFlags) bind(cmd *cobra.Command) {
	f.r.bind(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&f.appsDomain, "apps-domain", envOr("SVC_APPS_DOMAIN", "apps.localhost"), "domain whose subdomains serve agents (env SVC_APPS_DOMAIN)")
	fs.StringVar(&f.deployID, "deployment", "", "talk to this deployment's pinned URL instead of the persistent one")
	fs.StringVar(&f.apiKey, "api-key", os.Getenv("SVC_AGENT_API_KEY"), "send this agent API key (ak_...) instead of minting a runtime token; no platform token needed (env SVC_AGENT_API_KEY)")
	fs.StringVar(&f.runtimeURL, "runtime", "", "talk straight to an agent runtime at this URL (svc dev: http://127.0.0.1:3847), with AUTH_TOKEN as its bearer; no platform")
}

// agentTarget is a runtime to call: the client that reaches it, the agent, the agent's URL and
// the bearer to send. direct means there is no token to mint again (an ak_ key, or AUTH_TOKEN
// of a runtime called straight).
type agentTarget struct {
	c          *client.Client
	agent      client.Agent
	url, token string
	direct     bool
	dialled    string // the address a refused connection names: the platform's, or --runtime's
}

// target resolves the runtime of the agent named by positional (else --agent) and its
// credential: with --runtime that URL and AUTH_TOKEN (or --api-key); with --api-key the key and
// the agent's URL from its slug, without calling the platform; otherwise the platform resolves
// the agent and mints a runtime token with the pk_ token. command names the command in the
// advice of its errors (svc chat).
func (f *agentFlags) target(ctx context.Context, positional, command string) (agentTarget, error) {
	if f.runtimeURL != "" {
		// Straight to a runtime (svc dev): its AUTH_TOKEN, if any, is the bearer; no platform.
		if _, err := client.ParseBaseURL(f.runtimeURL); err != nil {
			return agentTarget{}, fmt.Errorf("--runtime %q: want http(s)://host[:port]", f.runtimeURL)
		}
		t := agentTarget{c: client.New(f.runtimeURL, "", nil), agent: client.Agent{Slug: f.runtimeURL}, url: f.runtimeURL,
			token: os.Getenv("AUTH_TOKEN"), direct: true, dialled: f.runtimeURL}
		if f.apiKey != "" {
			t.token = f.apiKey
		}
		return t, nil
	}
	if f.apiKey != "" {
		// The key is the credential: no platform call, so the agent is named by its slug.
		if !strings.HasPrefix(f.apiKey, "ak_") {
			return agentTarget{}, errors.New("--api-key (SVC_AGENT_API_KEY): want an agent API key, ak_...; create one with `svc agents keys create AGENT NAME`")
		}
		slug := positional
		if slug == "" {
			slug = f.r.agent
		}
		if slug == "" {
			return agentTarget{}, fmt.Errorf("no agent: with --api-key, name the agent by its slug (%s SLUG --api-key ak_...)", command)
		}
		if _, err := client.ParseBaseURL(f.r.url); err != nil {
			return agentTarget{}, fmt.Errorf("setting SVC_URL (--url) = %q: want http(s)://host[:port]", f.r.url)
		}
		u, err := agentURL(f.r.url, slug, f.deployID, f.appsDomain)
		if err != nil {
			return agentTarget{}, err
		}
		return agentTarget{c: client.New(f.r.url, "", nil), agent: client.Agent{Slug: slug}, url: u, token: f.apiKey, direct: true, dialled: f.r.url}, nil
	}
	c, a, err := f.r.resolve(ctx, positional)
	if err != nil {
		return agentTarget{}, err
	}
	u, err := agentURL(f.r.url, a.Slug, f.deployID, f.appsDomain)
	if err != nil {
		return agentTarget{}, err
	}
	t := agentTarget{c: c, agent: a, url: u, dialled: f.r.url}
	if err := t.mint(ctx); err != nil {
		return agentTarget{}, err
	}
	return t, nil
}

// mint gets a new runtime token with the platform token.
func (t *agentTarget) mint(ctx context.Context) error {
	tok, err := t.c.MintRuntimeToken(ctx, t.agent.AgentID, client.TokenRequest{})
	if err != nil {
		return explain(err)
	}
	t.token = tok.Token
	return nil
}

// refusedAdvice says what to check when err is a refused connection; nil otherwise.
func (t *agentTarget) refusedAdvice(err error) error {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	if t.direct && t.url == t.dialled {
		return fmt.Errorf("no runtime answers at %s (connection refused): is it running? Check --runtime", t.dialled)
	}
	return refusedError(t.dialled)
}

// noActive explains NO_ACTIVE_DEPLOYMENT (the persistent URL serves production only): it names
// the deployments active in other environments, to promote or to call with --deployment, as
// `command AGENT --deployment ID` (svc chat).
func (t *agentTarget) noActive(ctx context.Context, err error, command string) error {
	slug := t.agent.Slug
	deps, lerr := t.c.ListDeployments(ctx, t.agent.AgentID, "")
	for _, d := range deps { // newest first
		if lerr == nil && d.IsActive && d.Environment != client.Production {
			return fmt.Errorf("%s has no active production deployment, which its URL serves (%w); deployment %s is active in %s: "+
				"promote it with `svc promote --agent %s --from %s`, or talk to it with `%s %s --deployment %s`",
				slug, err, d.DeployID, d.Environment, slug, d.Environment, command, slug, d.DeployID)
		}
	}
	return fmt.Errorf("%s has no active production deployment, which its URL serves (%w): deploy one with `svc deploy --agent %s`, "+
		"promote one with `svc promote --agent %s --from ENV`, or talk to a ready one with `%s %s --deployment DEPLOY_ID` (`svc status` lists them)",
		slug, err, slug, slug, command, slug)
}

// isNoActive reports whether err is the router's NO_ACTIVE_DEPLOYMENT for a minted token's
// agent (a direct call has no platform to ask which deployments are active).
func (t *agentTarget) isNoActive(err error) bool {
	var e *client.Error
	return !t.direct && errors.As(err, &e) && e.Code == client.CodeNoActiveDeployment
}

// isUnauthorized reports whether err is a 401 of the runtime.
func isUnauthorized(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == http.StatusUnauthorized
}
