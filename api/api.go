package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"svc/auth"
	"svc/deploy"
	"svc/errcode"
	"svc/registry"
)

// DefaultAppsDomain is the apps domain when Deps.AppsDomain is empty (CONTRACT §1).
const DefaultAppsDomain = "apps.localhost"

// Deps are what the platform API runs on. Stores, Objects, Tokens, APIKeys, Signer and Deployer
// are required; the rest have documented defaults.
type Deps struct {
	// Stores are the registry's stores (registry.NewStores), built once by the caller.
	Stores *registry.Stores
	// Objects stores source version archives; it is wrapped with registry.Checked.
	Objects registry.Objects
	// Tokens authenticates pk_ automation tokens and stores new ones.
	Tokens *registry.Tokens
	// APIKeys stores ak_ agent API keys.
	APIKeys *registry.APIKeys
	// Signer mints runtime tokens.
	Signer *auth.Signer
	// AppsDomain is the domain agent URLs live under: "apps.localhost" when empty. It may carry a
	// port ("apps.localhost:8080"), which then appears in the URLs the API answers with. URLs
	// use http for localhost domains and https otherwise.
	AppsDomain string
	// Logger receives the access log and internal errors; slog.Default() when nil.
	Logger *slog.Logger
	// Metrics is where the HTTP metrics are registered and, when it is also a
	// prometheus.Gatherer (a *prometheus.Registry is both), what /metrics serves. When nil a
	// private registry with the Go runtime collector is made.
	Metrics prometheus.Registerer
	// MetricsToken, when set, is the bearer token GET /metrics needs (SVC_METRICS_TOKEN);
	// empty, /metrics is open. See MetricsHandler.
	MetricsToken string
	// Tracer, when set, records a span per request, joining the caller's W3C trace context;
	// what a request starts (a build) joins its trace. nil records nothing.
	Tracer trace.Tracer
	// Evals queues a run of a ready deployment's evals (POST /api/deployments/{id}/evals); nil
	// answers 503.
	Evals func(ctx context.Context, d registry.Deployment) (registry.EvalRun, error)
	// Deployer decides and starts the builds of pushes and redeploys. Required.
	Deployer *deploy.Deployer
	// Runtimes, when set, lets the process that holds a runtime drop it when it is stopped.
	Runtimes RuntimeControl
}

// API is the platform HTTP API. Build it with New, add routes with Handle before serving, and
// serve Handler. Its methods are safe for concurrent use once serving starts.
type API struct {
	deps           Deps
	engine         *gin.Engine
	routes         []Route
	metricsHandler http.Handler // serves /metrics
	metrics        httpMetrics

	agents         *registry.Agents
	sources        *registry.Sources
	settings       *registry.Settings
	secrets        *registry.Secrets
	sourceVersions *registry.SourceVersions
	commitStatuses *registry.CommitStatuses
	deployments    *registry.Deployments
	buildLogStore  *registry.BuildLogs
	// lifecycle activates, promotes and rolls back deployments, and opens their bundles.
	lifecycle *deploy.Lifecycle
}

// HandlerFunc is a platform handler: parse (bindJSON), call the domain with c.Request.Context(),
// write the success response (writeJSON), or return an error for the one wrapper to write: an
// *Error (Errorf, InvalidField) or a domain sentinel that classify in errors.go maps to a code.
type HandlerFunc func(c *gin.Context) error

// Route declares one platform route. Everything about a route is here: how it is reached, who
// may call it, and how the OpenAPI document describes it.
type Route struct {
	// Method is the HTTP method (http.MethodGet...).
	Method string
	// Path is the gin path. An agent is always the parameter ":id" ("/api/agents/:id/...")
	// since gin needs one name per path segment; it takes the agent's id or its slug.
	Path string
	// Need is the least token kind the route needs (spec table 2.4); "" makes the route public
	// (no token is read at all).
	Need auth.Kind
	// Agent marks a route that acts on the agent named by ":id" (its id or slug): before the
	// handler runs, a token bound to another agent gets 403 and an unknown agent 404; the
	// handler reads the agent with AgentFrom.
	Agent bool
	// Summary is the one-line OpenAPI summary.
	Summary string
	// Request is a value of the JSON request body type, for OpenAPI; nil when the route takes no
	// JSON body.
	Request any
	// RequestTypes are further media types the body may have ("application/gzip"), for OpenAPI.
	RequestTypes []string
	// Status is the success status (200 when 0).
	Status int
	// Response is a value of the JSON success body type; nil when the success has no JSON body.
	Response any
	// ResponseType is the media type of a success body that is not JSON ("text/plain").
	ResponseType string
	// Query, when not nil, is every query parameter the route takes: before the handler runs, a
	// request with another one, or with one given twice or over 1,024 characters long, is
	// refused with 400 naming it (checkQuery), and the OpenAPI document lists them.
	Query []QueryParam
	// Errors lists further error codes the route answers with, for OpenAPI (the codes of
	// authentication, path parameters and bodies are listed without it).
	Errors []errcode.Code
	// Handle serves the route.
	Handle HandlerFunc
}

// New builds the API over deps and registers every route of the route table.
func New(deps Deps) (*API, error) {
	switch {
	case deps.Stores == nil:
		return nil, errors.New("api: Deps.Stores is required")
	case deps.Objects == nil:
		return nil, errors.New("api: Deps.Objects is required")
	case deps.Deployer == nil:
		return nil, errors.New("api: Deps.Deployer is required")
	case deps.Tokens == nil || deps.APIKeys == nil || deps.Signer == nil:
		return nil, errors.New("api: Deps.Tokens, Deps.APIKeys and Deps.Signer are required")
	}
	if deps.AppsDomain == "" {
		deps.AppsDomain = DefaultAppsDomain
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	deps.Objects = registry.Checked(deps.Objects)
	a := &API{
		deps:           deps,
		agents:         deps.Stores.Agents,
		sources:        deps.Stores.Sources,
		settings:       deps.Stores.Settings,
		secrets:        deps.Stores.Secrets,
		sourceVersions: deps.Stores.SourceVersions,
		commitStatuses: deps.Stores.CommitStatuses,
		deployments:    deps.Stores.Deployments,
		buildLogStore:  deps.Stores.BuildLogs,
		lifecycle: deploy.NewLifecycle(deploy.LifecycleConfig{
			Deployments: deps.Stores.Deployments, Sources: deps.Stores.Sources, Gate: deps.Stores.CommitStatuses, Objects: deps.Objects,
		}),
	}
	if err := a.setupMetrics(deps.Metrics); err != nil {
		return nil, err
	}

	// gin's mode is process-wide; release mode keeps it from printing routes and warnings.
	gin.SetMode(gin.ReleaseMode)
	a.engine = gin.New()
	a.engine.ContextWithFallback = true // c.Value reads the request context: PrincipalFrom(c) works
	a.engine.HandleMethodNotAllowed = true
	a.engine.RedirectTrailingSlash = false
	a.engine.RedirectFixedPath = false
	a.engine.Use(a.requestID, a.observe, a.recoverPanics, a.limitBody)
	a.engine.NoRoute(a.wrap(func(*gin.Context) error { return Errorf(errcode.NotFound, "no such route") }))
	a.engine.NoMethod(a.wrap(func(*gin.Context) error { return &Error{Code: errcode.MethodNotAllowed} }))
	for _, r := range a.routeTable() {
		a.Handle(r)
	}
	return a, nil
}

// Handler returns the HTTP handler of the platform API (a gin engine).
func (a *API) Handler() http.Handler { return a.engine }

// Handle registers r: gin serves it behind the authentication r declares, and the OpenAPI
// document lists it. Call it before serving (it is not safe to call concurrently with requests).
// It panics on a malformed route, a programmer error at wiring time.
func (a *API) Handle(r Route) {
	if r.Method == "" || !strings.HasPrefix(r.Path, "/") || r.Handle == nil {
		panic(fmt.Sprintf("api: route %s %q needs a method, a path and a handler", r.Method, r.Path))
	}
	if r.Agent && !strings.Contains(r.Path, "/:id") {
		panic(fmt.Sprintf("api: agent route %q has no :id parameter", r.Path))
	}
	if r.Need != "" && !r.Need.Valid() {
		panic(fmt.Sprintf("api: route %q needs unknown token kind %q", r.Path, r.Need))
	}
	if r.Agent && r.Need == "" {
		panic(fmt.Sprintf("api: agent route %q must need a token kind", r.Path))
	}
	handlers := []gin.HandlerFunc{}
	if r.Need != "" {
		handlers = append(handlers, a.authenticate(r.Need, r.Agent))
	}
	handle := r.Handle
	if r.Query != nil {
		handle = func(c *gin.Context) error {
			if err := checkQuery(c, r.Query); err != nil {
				return err
			}
			return r.Handle(c)
		}
	}
	handlers = append(handlers, a.wrap(handle))
	a.engine.Handle(r.Method, r.Path, handlers...)
	a.routes = append(a.routes, r)
}

// Routes returns the registered routes, in registration order.
func (a *API) Routes() []Route { return append([]Route(nil), a.routes...) }

// wrap adapts a HandlerFunc to gin: a returned error goes to writeError.
func (a *API) wrap(h HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			a.writeError(c, err)
		}
	}
}

// agentURL is the persistent URL of the agent with slug; pinnedURL that of one deployment.
func (a *API) agentURL(slug string) string { return a.appsURL(slug) }

// pinnedURL is the URL pinned to deployment deployID of the agent with slug (CONTRACT §2).
func (a *API) pinnedURL(deployID, slug string) string { return a.appsURL(deployID + "--" + slug) }

func (a *API) appsURL(label string) string {
	domain := a.deps.AppsDomain
	host, _, _ := strings.Cut(domain, ":")
	scheme := "https"
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		scheme = "http"
	}
	return scheme + "://" + label + "." + domain
}

// setupMetrics registers the HTTP metrics on reg (a private registry when nil), reusing
// collectors already registered there by an earlier API.
func (a *API) setupMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector())
		reg = r
	}
	g, ok := reg.(prometheus.Gatherer)
	if !ok {
		return errors.New("api: Deps.Metrics must also be a prometheus.Gatherer (use a *prometheus.Registry) so /metrics can serve it")
	}
	a.metricsHandler = MetricsHandler(g, a.deps.MetricsToken)
	m := newHTTPMetrics()
	var err error
	if m.requests, err = registerOrReuse(reg, m.requests); err != nil {
		return err
	}
	if m.latency, err = registerOrReuse(reg, m.latency); err != nil {
		return err
	}
	a.metrics = m
	return nil
}

func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("api: register metrics: %w", err)
	}
	return c, nil
}
