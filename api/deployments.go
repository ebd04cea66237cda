package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"svc/auth"
	"svc/deploy"
	"svc/errcode"
	"svc/registry"
)

// RuntimeControl is told when a deployment's runtime stops, so the process that holds it lets
// it go at once. Other runner processes see the stop at their next request, through the
// shared change counter in Redis (within their router's HostTTL, 1 s, if it could not be raised).
type RuntimeControl interface {
	Forget(deployID string)
}

// deploymentResponse is the deployment record of CONTRACT §3.
type deploymentResponse struct {
	DeployID        string     `json:"deployId"`
	BuildID         string     `json:"buildId"`
	AgentID         string     `json:"agentId"`
	Environment     string     `json:"environment"`
	Commit          string     `json:"commit"`
	Branch          string     `json:"branch"`
	SourceVersionID string     `json:"sourceVersionId"`
	Status          string     `json:"status" enum:"queued,building,ready,failed,cancelled"`
	IsActive        bool       `json:"isActive"`
	URL             string     `json:"url" doc:"the URL pinned to this deployment"`
	Runtime         string     `json:"runtime" enum:"running,stopped,unavailable,none" doc:"none: the deployment is not ready; unavailable: a runner could not load its bundle (runtimeError)"`
	RuntimeError    string     `json:"runtimeError,omitempty" doc:"why a runner could not load the bundle, when runtime is unavailable"`
	PromotedFrom    string     `json:"promotedFrom,omitempty"`
	CreatedAt       time.Time  `json:"createdAt"`
	ReadyAt         *time.Time `json:"readyAt"`
	ActivatedAt     *time.Time `json:"activatedAt"`
	Error           string     `json:"error,omitempty"`
}

func (a *API) deploymentJSON(d registry.Deployment, slug string) deploymentResponse {
	runtime := "running"
	switch {
	case d.Status != registry.StatusReady:
		runtime = "none"
	case d.RuntimeStopped:
		runtime = "stopped"
	case d.RuntimeError != "":
		runtime = "unavailable"
	}
	return deploymentResponse{
		DeployID: d.ID, BuildID: d.BuildID, AgentID: d.AgentID, Environment: d.Environment, Commit: d.CommitSHA,
		Branch: d.Branch, SourceVersionID: d.SourceVersionID, Status: d.Status, IsActive: d.IsActive,
		URL: a.pinnedURL(d.ID, slug), Runtime: runtime, RuntimeError: d.RuntimeError, PromotedFrom: d.PromotedFrom,
		CreatedAt: d.CreatedAt.UTC(), ReadyAt: utcPtr(d.ReadyAt), ActivatedAt: utcPtr(d.ActivatedAt), Error: d.Error,
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

type redeployRequest struct {
	AgentID         string `json:"agentId" doc:"required: the agent's id or slug"`
	Branch          string `json:"branch,omitempty" doc:"git sources: default the source's default branch"`
	Environment     string `json:"environment,omitempty" doc:"default production"`
	ReuseBuild      bool   `json:"reuseBuild,omitempty"`
	SourceVersionID string `json:"sourceVersionId,omitempty" doc:"hosted sources: default the newest"`
}

type redeployResponse struct {
	DeployID    string `json:"deployId"`
	BuildID     string `json:"buildId"`
	Environment string `json:"environment"`
	Reused      bool   `json:"reused,omitempty"`
}

type promoteRequest struct {
	AgentID         string `json:"agentId" doc:"the agent's id or slug"`
	FromEnvironment string `json:"fromEnvironment"`
	ToEnvironment   string `json:"toEnvironment,omitempty" doc:"default production"`
	Force           bool   `json:"force,omitempty" doc:"override the svc/evals commit status"`
}

type rollbackRequest struct {
	AgentID     string `json:"agentId" doc:"the agent's id or slug"`
	Environment string `json:"environment,omitempty" doc:"default production"`
	DeployID    string `json:"deployId,omitempty"`
}

type runtimeResponse struct {
	Runtime string `json:"runtime" enum:"running,stopped"`
}

type activationResponse struct {
	Environment  string    `json:"environment"`
	Action       string    `json:"action" enum:"activate,promote,rollback,build"`
	FromDeployID string    `json:"fromDeployId,omitempty"`
	ToDeployID   string    `json:"toDeployId"`
	Actor        string    `json:"actor" doc:"token id, or build for automatic activation"`
	CreatedAt    time.Time `json:"createdAt"`
}

// deploymentRoutes are the deployment lifecycle (spec 4.1, CONTRACT §3).
func (a *API) deploymentRoutes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/api/deployments/redeploy", Need: auth.Operator, Summary: "Build a branch head or source version, or reuse a build of it",
			Request: redeployRequest{}, Response: redeployResponse{}, Errors: []errcode.Code{errcode.NotFound}, Handle: a.redeploy},
		{Method: http.MethodPost, Path: "/api/deployments/promote", Need: auth.Operator, Summary: "Copy the active deployment of one environment into a new, active deployment of another",
			Request: promoteRequest{}, Response: deploymentResponse{}, Errors: []errcode.Code{errcode.EvalGateBlocked, errcode.BundleUnavailable, errcode.NotFound}, Handle: a.promote},
		{Method: http.MethodPost, Path: "/api/deployments/rollback", Need: auth.Operator, Summary: "Activate an earlier deployment of an environment",
			Request: rollbackRequest{}, Response: deploymentResponse{}, Errors: []errcode.Code{errcode.NothingToRollBack, errcode.NotFound}, Handle: a.rollback},
		{Method: http.MethodGet, Path: "/api/deployments/:deployId", Need: auth.Observer, Summary: "A deployment record",
			Response: deploymentResponse{}, Handle: a.getDeployment},
		{Method: http.MethodPost, Path: "/api/deployments/:deployId/activate", Need: auth.Operator, Summary: "Make a ready deployment the active one of its environment",
			Response: deploymentResponse{}, Errors: []errcode.Code{errcode.BuildNotReady}, Handle: a.activate},
		{Method: http.MethodGet, Path: "/api/deployments/:deployId/snapshot", Need: auth.Observer, Summary: "The resolved agent configuration of the deployment's bundle (secrets as env: names only)",
			Response: map[string]any{}, Errors: []errcode.Code{errcode.BundleUnavailable}, Handle: a.snapshot},
		{Method: http.MethodPost, Path: "/api/deployments/:deployId/evals", Need: auth.Operator, Summary: "Run the deployment's evals (queued; the svc/evals status of its commit goes pending)",
			Status: http.StatusAccepted, Response: registry.EvalRun{}, Errors: []errcode.Code{errcode.BuildNotReady, errcode.Unavailable}, Handle: a.runEvals},
		{Method: http.MethodGet, Path: "/api/deployments/:deployId/evals", Need: auth.Observer, Summary: "The latest run of the deployment's evals: state and each eval's runs and assertions",
			Response: registry.EvalRun{}, Handle: a.latestEvals},
		{Method: http.MethodPost, Path: "/api/deployments/:deployId/runtime/start", Need: auth.Operator, Summary: "Start the deployment's runtime",
			Response: runtimeResponse{}, Handle: a.runtimeStart},
		{Method: http.MethodPost, Path: "/api/deployments/:deployId/runtime/stop", Need: auth.Operator, Summary: "Stop the deployment's runtime; its URLs answer 503 RUNTIME_STOPPED",
			Response: runtimeResponse{}, Handle: a.runtimeStop},
		{Method: http.MethodGet, Path: "/api/agents/:id/deployments", Need: auth.Observer, Agent: true,
			Summary: "The agent's deployments, newest first: a bare array of up to 500; with limit or before, a page {deployments, next?}",
			Query:   deploymentListParams, Response: []deploymentResponse{}, Handle: a.listDeployments},
		{Method: http.MethodGet, Path: "/api/agents/:id/active-deployment", Need: auth.Observer, Agent: true, Summary: "The active deployment of an environment (query environment, default production)",
			Response: deploymentResponse{}, Handle: a.activeDeployment},
		{Method: http.MethodGet, Path: "/api/agents/:id/activations", Need: auth.Observer, Agent: true, Summary: "Every change of an active deployment: who, when, from, to (query environment to filter)",
			Response: []activationResponse{}, Handle: a.listActivations},
	}
}

// deploymentOf loads the :deployId deployment and applies the caller's agent binding.
func (a *API) deploymentOf(c *gin.Context) (registry.Deployment, registry.Agent, error) {
	d, err := a.deployments.Get(c.Request.Context(), c.Param("deployId"))
	if err != nil {
		return registry.Deployment{}, registry.Agent{}, err
	}
	ag, err := a.authorizeAgent(c, d.AgentID)
	if err != nil {
		// A token bound to another agent must not learn that the deployment exists.
		if e := (*Error)(nil); errors.As(err, &e) && e.Code == errcode.Forbidden {
			return registry.Deployment{}, registry.Agent{}, registry.ErrDeploymentNotFound
		}
		return registry.Deployment{}, registry.Agent{}, err
	}
	return d, ag, nil
}

// agentOfBody authorizes the agent named in a request body (agentId: its id or its slug).
func (a *API) agentOfBody(c *gin.Context, agentID string) (registry.Agent, error) {
	if agentID == "" {
		return registry.Agent{}, InvalidField("agentId", "is required")
	}
	return a.authorizeAgent(c, agentID)
}

func validEnvironment(field, env string) error {
	if env == "" {
		return nil
	}
	if len(env) > 200 || strings.ContainsAny(env, " \t\r\n") {
		return InvalidField(field, "must be an environment name without spaces, at most 200 characters")
	}
	return nil
}

func (a *API) redeploy(c *gin.Context) error {
	var req redeployRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	ag, err := a.agentOfBody(c, req.AgentID)
	if err != nil {
		return err
	}
	if err := validEnvironment("environment", req.Environment); err != nil {
		return err
	}
	if req.Branch != "" {
		if err := registry.ValidateBranch("branch", req.Branch); err != nil {
			return err
		}
	}
	out, err := a.deps.Deployer.Redeploy(c.Request.Context(), deploy.RedeployRequest{
		AgentID: ag.ID, Branch: req.Branch, Environment: req.Environment, SourceVersionID: req.SourceVersionID, ReuseBuild: req.ReuseBuild,
	})
	switch {
	case errors.Is(err, deploy.ErrNoSource):
		return Errorf(errcode.InvalidRequest, "the agent has no source to build: connect a git repository or upload a source version")
	case errors.Is(err, deploy.ErrBranchAbsent):
		return InvalidField("branch", "%s", strings.TrimPrefix(err.Error(), "deploy: "))
	case errors.Is(err, deploy.ErrBadRedeploy):
		return Errorf(errcode.InvalidRequest, "%s", strings.TrimPrefix(err.Error(), "deploy: bad redeploy request: "))
	case errors.Is(err, registry.ErrSourceVersionNotFound):
		return InvalidField("sourceVersionId", "no source version %s of this agent", req.SourceVersionID)
	case err != nil:
		return err
	}
	return writeJSON(c, http.StatusOK, redeployResponse{DeployID: out.DeployID, BuildID: out.BuildID, Environment: out.Environment, Reused: out.Reused})
}

func (a *API) getDeployment(c *gin.Context) error {
	d, ag, err := a.deploymentOf(c)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.deploymentJSON(d, ag.Slug))
}

func (a *API) activate(c *gin.Context) error {
	d, ag, err := a.deploymentOf(c)
	if err != nil {
		return err
	}
	d, err = a.lifecycle.Activate(c.Request.Context(), d, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.deploymentJSON(d, ag.Slug))
}

func (a *API) promote(c *gin.Context) error {
	var req promoteRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	ag, err := a.agentOfBody(c, req.AgentID)
	if err != nil {
		return err
	}
	if req.FromEnvironment == "" {
		return InvalidField("fromEnvironment", "is required")
	}
	if err := validEnvironment("fromEnvironment", req.FromEnvironment); err != nil {
		return err
	}
	if err := validEnvironment("toEnvironment", req.ToEnvironment); err != nil {
		return err
	}
	to := req.ToEnvironment
	if to == "" {
		to = registry.Production
	}
	if to == req.FromEnvironment {
		return InvalidField("toEnvironment", "must differ from fromEnvironment")
	}
	d, err := a.lifecycle.Promote(c.Request.Context(), deploy.PromoteRequest{
		AgentID: ag.ID, From: req.FromEnvironment, To: to, Force: req.Force, Actor: actor(c),
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.deploymentJSON(d, ag.Slug))
}

func (a *API) rollback(c *gin.Context) error {
	var req rollbackRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	ag, err := a.agentOfBody(c, req.AgentID)
	if err != nil {
		return err
	}
	if err := validEnvironment("environment", req.Environment); err != nil {
		return err
	}
	d, err := a.lifecycle.Rollback(c.Request.Context(), ag.ID, req.Environment, req.DeployID, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.deploymentJSON(d, ag.Slug))
}

func (a *API) setRuntime(c *gin.Context, stopped bool) error {
	d, _, err := a.deploymentOf(c)
	if err != nil {
		return err
	}
	if _, err := a.deployments.SetRuntimeStopped(c.Request.Context(), d.ID, stopped); err != nil {
		return err
	}
	state := "running"
	if stopped {
		state = "stopped"
		if a.deps.Runtimes != nil {
			a.deps.Runtimes.Forget(d.ID)
		}
	}
	return writeJSON(c, http.StatusOK, runtimeResponse{Runtime: state})
}

func (a *API) runtimeStart(c *gin.Context) error { return a.setRuntime(c, false) }
func (a *API) runtimeStop(c *gin.Context) error  { return a.setRuntime(c, true) }

// deploymentListParams are the query parameters of GET /api/agents/{id}/deployments.
var deploymentListParams = []QueryParam{
	{Name: "environment", Doc: "only the deployments of this environment"},
	{Name: "active", Type: "boolean", Doc: "true: only the active deployment of each environment"},
	limitParam, beforeParam,
}

// deploymentListResponse is a page of GET /api/agents/{id}/deployments (with ?limit= or ?before=).
type deploymentListResponse struct {
	Deployments []deploymentResponse `json:"deployments"`
	Next        string               `json:"next,omitempty" doc:"the cursor of the next page, for ?before=; present only when more items may follow"`
}

// listDeployments serves GET /api/agents/{id}/deployments: without ?limit= and ?before=, the
// bare array of up to 500 it always answered; with either, a page {deployments, next?} like
// the agent's other lists.
func (a *API) listDeployments(c *gin.Context) error {
	ag := agentOf(c)
	q := registry.DeploymentQuery{Environment: c.Query("environment")}
	if err := validEnvironment("environment", q.Environment); err != nil {
		return err
	}
	switch v := c.Query("active"); v {
	case "", "false":
	case "true":
		q.Active = true
	default:
		return InvalidField("active", "must be true or false, got %q", v)
	}
	limit, before, err := listPage(c)
	if err != nil {
		return err
	}
	paged := c.Query("limit") != "" || c.Query("before") != ""
	if !paged {
		limit = 500
	}
	q.Limit, q.Before = limit, before
	ds, next, err := a.deployments.Page(c.Request.Context(), ag.ID, q)
	if err != nil {
		return pageError(err)
	}
	out := make([]deploymentResponse, len(ds))
	for i, d := range ds {
		out[i] = a.deploymentJSON(d, ag.Slug)
	}
	if !paged {
		return writeJSON(c, http.StatusOK, out)
	}
	return writeJSON(c, http.StatusOK, deploymentListResponse{Deployments: out, Next: next.String()})
}

func (a *API) activeDeployment(c *gin.Context) error {
	ag := agentOf(c)
	env := c.DefaultQuery("environment", registry.Production)
	if err := validEnvironment("environment", env); err != nil {
		return err
	}
	d, err := a.deployments.Active(c.Request.Context(), ag.ID, env)
	if errors.Is(err, registry.ErrNoActive) {
		return Errorf(errcode.NotFound, "environment %s of agent %s has no active deployment", env, ag.ID)
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.deploymentJSON(d, ag.Slug))
}

func (a *API) listActivations(c *gin.Context) error {
	ag := agentOf(c)
	env := c.Query("environment")
	if err := validEnvironment("environment", env); err != nil {
		return err
	}
	acts, err := a.deployments.Activations(c.Request.Context(), ag.ID, env, 0)
	if err != nil {
		return err
	}
	out := make([]activationResponse, len(acts))
	for i, x := range acts {
		out[i] = activationResponse{Environment: x.Environment, Action: x.Action, FromDeployID: x.FromDeployID, ToDeployID: x.ToDeployID, Actor: x.Actor, CreatedAt: x.CreatedAt.UTC()}
	}
	return writeJSON(c, http.StatusOK, out)
}

func (a *API) snapshot(c *gin.Context) error {
	d, _, err := a.deploymentOf(c)
	if err != nil {
		return err
	}
	b, ag, err := a.lifecycle.Open(c.Request.Context(), d)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, snapshotOf(d, b.Manifest, ag))
}

// runEvals serves POST /api/deployments/{deployId}/evals: it queues a run of the ready
// deployment's evals.
func (a *API) runEvals(c *gin.Context) error {
	d, _, err := a.deploymentOf(c)
	if err != nil {
		return err
	}
	if d.Status != registry.StatusReady {
		return Errorf(errcode.BuildNotReady, "deployment %s is %s; evals run on a ready deployment", d.ID, d.Status)
	}
	if a.deps.Evals == nil {
		return Errorf(errcode.Unavailable, "this process cannot run evals")
	}
	r, err := a.deps.Evals(c.Request.Context(), d)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, r)
}

// latestEvals serves GET /api/deployments/{deployId}/evals.
func (a *API) latestEvals(c *gin.Context) error {
	d, _, err := a.deploymentOf(c)
	if err != nil {
		return err
	}
	r, err := a.deps.Stores.EvalRuns.Latest(c.Request.Context(), d.ID)
	if errors.Is(err, registry.ErrNoEvalRun) {
		return Errorf(errcode.NotFound, "deployment %s has no eval run yet", d.ID)
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, r)
}
