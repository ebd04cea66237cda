package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"svc/errcode"
	"svc/registry"
	"svc/webhook"
)

// webhookResult is what a push did for one agent (CONTRACT §4).
type webhookResult struct {
	Action      string `json:"action" enum:"build,recorded,skipped,pong"`
	Reason      string `json:"reason"`
	BuildID     string `json:"buildId,omitempty"`
	DeployID    string `json:"deployId,omitempty"`
	Environment string `json:"environment,omitempty"`
	AgentID     string `json:"agentId,omitempty"`
}

type webhookResponse struct {
	webhookResult
	// Results lists every agent's outcome when one repository feeds several agents.
	Results []webhookResult `json:"results,omitempty"`
}

func (a *API) webhookRoutes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/webhooks/:host", Summary: "Push webhook of a git host (github, gitea, forgejo, gitlab); ?agent= (its id or slug) to name the agent",
			Status: http.StatusAccepted, Response: webhookResponse{}, Errors: []errcode.Code{errcode.Unauthenticated}, Handle: a.receiveWebhook},
	}
}

// receiveWebhook turns a push into builds (CONTRACT §4). The payload is parsed only to learn
// which repository it names; nothing is recorded or built before the signature of the raw body
// checks out against that agent's webhook secret.
func (a *API) receiveWebhook(c *gin.Context) error {
	host, ok := webhook.HostFromPath(c.Param("host"))
	if !ok {
		return Errorf(errcode.NotFound, "unknown git host %q: use github, gitea, forgejo or gitlab", c.Param("host"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, webhook.MaxPayloadBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return Errorf(errcode.PayloadTooLarge, "webhook payloads are at most %d bytes", webhook.MaxPayloadBytes)
		}
		return Errorf(errcode.InvalidRequest, "the request body could not be read")
	}
	ev, err := webhook.Parse(host, c.Request.Header, body)
	if err != nil {
		return Errorf(errcode.InvalidRequest, "%s", err.Error())
	}
	ctx := c.Request.Context()

	// 1. Which agents: ?agent=, or every agent whose git source is this repository.
	var sources []registry.Source
	if ref := c.Query("agent"); ref != "" { // the agent's id or slug
		ag, err := a.agents.Resolve(ctx, ref)
		if err != nil && !errors.Is(err, registry.ErrAgentNotFound) {
			return err
		}
		src, err := a.sources.Get(ctx, ag.ID)
		if errors.Is(err, registry.ErrSourceNotFound) || errors.Is(err, registry.ErrAgentNotFound) {
			return Errorf(errcode.NotFound, "agent %s has no git source", ref)
		}
		if err != nil {
			return err
		}
		sources = append(sources, src)
	} else if ev.Push != nil {
		seen := map[string]bool{}
		for _, u := range webhook.RepoURLs(*ev.Push) {
			found, err := a.sources.FindByRepoURL(ctx, u)
			if err != nil {
				return err
			}
			for _, s := range found {
				if !seen[s.AgentID] {
					seen[s.AgentID] = true
					sources = append(sources, s)
				}
			}
		}
	}
	if ev.Kind == webhook.KindPing && len(sources) == 0 {
		return writeJSON(c, http.StatusOK, webhookResponse{webhookResult: webhookResult{Action: "pong", Reason: "ping"}})
	}
	if ev.Kind == webhook.KindIgnored && len(sources) == 0 {
		// An event that is not a push (issues, stars, ...) names no agent to check a signature
		// against and does nothing: a hook subscribed to every event must not see it fail.
		return writeJSON(c, http.StatusAccepted, webhookResponse{webhookResult: webhookResult{Action: "skipped", Reason: ev.Reason}})
	}
	if len(sources) == 0 {
		return Errorf(errcode.NotFound, "no agent is connected to this repository")
	}

	// 2. Signatures: every agent with a secret must be satisfied by the raw body.
	for _, s := range sources {
		if s.Type != registry.SourceGit {
			return Errorf(errcode.NotFound, "agent %s has no git source", s.AgentID)
		}
		if s.WebhookSecret == "" {
			continue
		}
		if err := webhook.Verify(host, c.Request.Header, body, s.WebhookSecret); err != nil {
			return Errorf(errcode.Unauthenticated, "webhook signature is missing or does not match the agent's webhook secret")
		}
	}

	// 3. The event.
	switch ev.Kind {
	case webhook.KindPing:
		return writeJSON(c, http.StatusOK, webhookResponse{webhookResult: webhookResult{Action: "pong", Reason: "ping"}})
	case webhook.KindIgnored:
		return writeJSON(c, http.StatusAccepted, webhookResponse{webhookResult: webhookResult{Action: "skipped", Reason: ev.Reason}})
	}
	var results []webhookResult
	for _, s := range sources {
		out, err := a.deps.Deployer.Push(ctx, s.AgentID, *ev.Push)
		if err != nil {
			return err
		}
		results = append(results, webhookResult{
			Action: out.Action, Reason: out.Reason, BuildID: out.BuildID, DeployID: out.DeployID, Environment: out.Environment, AgentID: s.AgentID,
		})
	}
	resp := webhookResponse{webhookResult: results[0]}
	if len(results) > 1 {
		resp.Results = results
	}
	return writeJSON(c, http.StatusAccepted, resp)
}
