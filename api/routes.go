package api

import (
	"net/http"
	"slices"

	"svc/auth"
	"svc/errcode"
	"svc/registry"
	"svc/runner/access"
)

// routeTable is every route of the platform API. A route with the agent's ":id" takes its id or
// its slug (allowAgent). To add routes, write a method returning
// []Route in a new file and append its result here; New registers them all and the OpenAPI
// document lists them (openapi_test.go fails when gin and the document disagree).
func (a *API) routeTable() []Route {
	return slices.Concat(
		a.systemRoutes(),
		a.tokenRoutes(),
		a.agentRoutes(),
		a.deploymentRoutes(),
		a.buildRoutes(),
		a.webhookRoutes(),
	)
}

// systemRoutes are the public routes: health, metrics and the OpenAPI document.
func (a *API) systemRoutes() []Route {
	return []Route{
		{Method: http.MethodGet, Path: "/health", Summary: "Health of the platform API and its database",
			Response: healthResponse{}, Errors: []errcode.Code{errcode.Unavailable}, Handle: a.health},
		{Method: http.MethodGet, Path: "/metrics", Summary: "Prometheus metrics; with SVC_METRICS_TOKEN set, it needs that bearer token",
			ResponseType: "text/plain", Errors: []errcode.Code{errcode.Unauthenticated}, Handle: a.serveMetrics},
		{Method: http.MethodGet, Path: "/api/openapi.json", Summary: "This OpenAPI 3.1 document",
			ResponseType: "application/json", Handle: a.serveOpenAPI},
	}
}

// tokenRoutes manage automation tokens.
func (a *API) tokenRoutes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/api/tokens", Need: auth.Admin, Summary: "Create an automation token (the value is shown once)",
			Request: createTokenRequest{}, Status: http.StatusCreated, Response: createTokenResponse{}, Handle: a.createToken},
		{Method: http.MethodGet, Path: "/api/tokens/self", Need: auth.Observer, Summary: "The calling token: its id, name, kind and agent binding (what the console shows and enables)",
			Response: tokenSelfResponse{}, Handle: a.tokenSelf},
		{Method: http.MethodDelete, Path: "/api/tokens/:tokenId", Need: auth.Admin, Summary: "Revoke an automation token at once",
			Status: http.StatusNoContent, Handle: a.revokeToken},
	}
}

// agentRoutes are the agent and its setup: source, source versions, keys, secrets, settings,
// commit statuses and runtime tokens.
func (a *API) agentRoutes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/api/agents", Need: auth.Admin, Summary: "Create an agent",
			Request: createAgentRequest{}, Status: http.StatusCreated, Response: agentResponse{}, Errors: []errcode.Code{errcode.Conflict}, Handle: a.createAgent},
		{Method: http.MethodGet, Path: "/api/agents", Need: auth.Observer, Summary: "List agents (a bound token sees its own)",
			Response: agentListResponse{}, Handle: a.listAgents},
		{Method: http.MethodGet, Path: "/api/agents/:id", Need: auth.Observer, Agent: true, Summary: "Get an agent with its source and settings",
			Response: agentResponse{}, Handle: a.getAgent},
		{Method: http.MethodPut, Path: "/api/agents/:id/source", Need: auth.Admin, Agent: true, Summary: "Connect a git repository or hosted source",
			Request: putSourceRequest{}, Response: sourceResponse{}, Handle: a.putSource},
		{Method: http.MethodPost, Path: "/api/agents/:id/source-versions", Need: auth.Operator, Agent: true,
			Summary: "Upload a source tree (tar.gz, or JSON files); validated, then stored",
			Request: sourceFilesRequest{}, RequestTypes: []string{"application/gzip"},
			Status: http.StatusCreated, Response: sourceVersionResponse{}, Errors: []errcode.Code{errcode.InvalidSource}, Handle: a.createSourceVersion},
		{Method: http.MethodPost, Path: "/api/agents/:id/api-keys", Need: auth.Admin, Agent: true, Summary: "Create an agent API key (the value is shown once)",
			Request: createAPIKeyRequest{}, Status: http.StatusCreated, Response: createAPIKeyResponse{}, Handle: a.createAPIKey},
		{Method: http.MethodGet, Path: "/api/agents/:id/api-keys", Need: auth.Admin, Agent: true, Summary: "List the agent's API keys: ids, names, creation and last use, never a value",
			Response: apiKeyListResponse{}, Handle: a.listAPIKeys},
		{Method: http.MethodDelete, Path: "/api/agents/:id/api-keys/:keyId", Need: auth.Admin, Agent: true, Summary: "Revoke an agent API key; every runner refuses it within 5 seconds",
			Status: http.StatusNoContent, Errors: []errcode.Code{errcode.NotFound}, Handle: a.revokeAPIKey},
		{Method: http.MethodGet, Path: "/api/agents/:id/access", Need: auth.Admin, Agent: true,
			Summary:  "Get the agent's access settings (its OpenID provider, allow rules, collaborators) as stored; 404 when none",
			Response: access.Settings{}, Errors: []errcode.Code{errcode.NotFound}, Handle: a.getAccess},
		{Method: http.MethodPut, Path: "/api/agents/:id/access", Need: auth.Admin, Agent: true,
			Summary: "Set the agent's access settings; every runtime of the agent applies them within seconds",
			Request: access.Settings{}, Response: access.Settings{}, Handle: a.putAccess},
		{Method: http.MethodGet, Path: "/api/agents/:id/secrets", Need: auth.Admin, Agent: true, Summary: "List the agent's secrets: names and when each was set, never a value",
			Response: secretListResponse{}, Handle: a.listSecrets},
		{Method: http.MethodPut, Path: "/api/agents/:id/secrets/:name", Need: auth.Admin, Agent: true, Summary: "Set a secret (never readable back); what resolves env:NAME first, from its next use on",
			Request: putSecretRequest{}, Status: http.StatusNoContent, Handle: a.putSecret},
		{Method: http.MethodDelete, Path: "/api/agents/:id/secrets/:name", Need: auth.Admin, Agent: true, Summary: "Remove a secret (404 when the agent has none of that name)",
			Status: http.StatusNoContent, Handle: a.deleteSecret},
		{Method: http.MethodGet, Path: "/api/agents/:id/deploy-settings", Need: auth.Observer, Agent: true, Summary: "Get deploy settings",
			Response: settingsResponse{}, Handle: a.getSettings},
		{Method: http.MethodPut, Path: "/api/agents/:id/deploy-settings", Need: auth.Operator, Agent: true, Summary: "Change any subset of the deploy settings",
			Request: putSettingsRequest{}, Response: settingsResponse{}, Handle: a.putSettings},
		{Method: http.MethodGet, Path: "/api/agents/:id/settings", Need: auth.Observer, Agent: true, Summary: "Get deploy settings (alias of deploy-settings)",
			Response: settingsResponse{}, Handle: a.getSettings},
		{Method: http.MethodPut, Path: "/api/agents/:id/settings", Need: auth.Operator, Agent: true, Summary: "Change deploy settings (alias of deploy-settings)",
			Request: putSettingsRequest{}, Response: settingsResponse{}, Handle: a.putSettings},
		{Method: http.MethodGet, Path: "/api/agents/:id/commit-statuses", Need: auth.Observer, Agent: true,
			Summary:  "A commit's statuses (?commit=SHA), newest first, the latest of each context marked latest",
			Response: commitStatusListResponse{}, Handle: a.listCommitStatuses},
		{Method: http.MethodPost, Path: "/api/agents/:id/commit-statuses", Need: auth.Operator, Agent: true, Summary: "Report a commit status",
			Request: commitStatusRequest{}, Status: http.StatusCreated, Response: commitStatusResponse{}, Handle: a.addCommitStatus},
		{Method: http.MethodGet, Path: "/api/agents/:id/sessions", Need: auth.Observer, Agent: true,
			Summary: "List the agent's chat sessions, newest first (by updatedAt, then id), without their history, a page at a time " +
				"(?userId=, ?screen= filter on those metadata keys; ?limit= 1..500, default 100; ?before= the previous page's next)",
			Query: sessionListParams, Response: sessionListResponse{}, Handle: a.listSessions},
		{Method: http.MethodGet, Path: "/api/agents/:id/feedback", Need: auth.Observer, Agent: true,
			Summary: "List the feedback on the agent's turns, newest first (by createdAt, then id), a page at a time " +
				"(?userId=, ?screen= filter on those metadata keys; ?limit= 1..500, default 100; ?before= the previous page's next)",
			Query: feedbackListParams, Response: feedbackListResponse{}, Handle: a.listFeedback},
		{Method: http.MethodGet, Path: "/api/agents/:id/runs", Need: auth.Observer, Agent: true,
			Summary: "List the agent's runs (chat turns, eval turns included), newest first (by startedAt, then id), a page at a time " +
				"(?userId=, ?screen= filter on those metadata keys, ?session=, ?deployment= on the run's session and deployment; " +
				"?limit= 1..500, default 100; ?before= the previous page's next)",
			Query: runListParams, Response: runListResponse{}, Handle: a.listRuns},
		{Method: http.MethodGet, Path: "/api/agents/:id/runs/:runId", Need: auth.Observer, Agent: true, Summary: "Get one run of the agent",
			Response: registry.Run{}, Handle: a.getRun},
		{Method: http.MethodPost, Path: "/api/agents/:id/tokens", Need: auth.Operator, Agent: true, Summary: "Mint a runtime token for chatting with the agent",
			Request: runtimeTokenRequest{}, Status: http.StatusCreated, Response: runtimeTokenResponse{}, Handle: a.mintRuntimeToken},
	}
}
