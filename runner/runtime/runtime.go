package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"svc/agent"
	"svc/auth"
	"svc/runner/access"
	"svc/runner/approvals"
	"svc/runner/connections"
	"svc/runner/durable/engine"
	"svc/runner/handlers"
	"svc/runner/models"
	"svc/runner/sandbox"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
	"svc/runner/sessions/memstore"
	"svc/runner/sse"
	"svc/runner/stores"
	"svc/runner/streams/memstream"
	"svc/runner/tools"
	"svc/runner/turn"
)

// DefaultIdleTimeout is how long a live session stays in memory without requests (spec §8).
const DefaultIdleTimeout = 30 * time.Minute

// DefaultParkAfter is how long a streamed turn runs before it is parked (Options.ParkAfter,
// SVC_PARK_AFTER): a quick turn keeps net/http's connection (parking costs a hijack and a
// connection given back), and a turn still running after it is one waiting for its model,
// whose first token alone takes longer, with net/http's buffers held for no one.
const DefaultParkAfter = 100 * time.Millisecond

// Verifier checks a runtime token (auth.Signer implements it).
type Verifier interface {
	Verify(token string) (auth.RuntimeClaims, error)
}

// Options configure a Runtime. Zero values are documented defaults.
type Options struct {
	// Agent is the validated agent source tree. Required.
	Agent *agent.Agent
	// AgentID is the platform agent the runtime serves: the namespace of its sessions in a
	// shared store, and the agent a runtime token must name. "" under svc dev.
	AgentID string
	// DeployID and Version are reported by /health; Version defaults to svc.json's version.
	DeployID string
	Version  string
	// Sessions keeps sessions; nil means an in-memory store (svc dev).
	Sessions sessions.Store
	// Blobs keeps the content of attachments apart from history rows; nil means in memory.
	Blobs sessions.Blobs
	// Storage bounds what history may hold per session and per agent.
	Storage turn.StorageLimits
	// Bodies bounds the memory of large request bodies in flight; share one among the runtimes
	// of a process. nil means a budget of DefaultBodyMemory for this runtime alone.
	Bodies *BodyBudget
	// Locker grants one turn at a time per session; nil means an in-process lock.
	Locker sessions.Locker
	// SharedStore says that other runtimes (other deployments of the agent, other runner
	// processes) use the same Sessions store: no live copy of an idle session is kept between
	// requests, and a chat takes the turn lock before it reads the session (a copy live under
	// another request is refreshed under the lock), so every turn starts from the stored session
	// and never overwrites another runtime's turn. Give such runtimes one shared Locker too.
	SharedStore bool
	// Verifier checks runtime tokens (bearer JWTs); nil means runtime tokens are not accepted.
	Verifier Verifier
	// Keys checks ak_ agent API keys: a key of AgentID is a trusted service credential on every
	// route; nil means ak_ keys are refused.
	Keys KeyChecker
	// Access, when set, adds the sign-in of CONTRACT §8: identity-provider bearer tokens, the
	// svc_session cookie and the /auth routes, for agents with access settings. Share one among
	// the runtimes of a process. nil: neither is accepted, and /auth/login is 404.
	Access *Access
	// AuthToken, when set, is a bearer value that grants trusted access (svc dev's AUTH_TOKEN).
	// With none of Verifier, Keys, Access and AuthToken every route is open (local development).
	AuthToken string
	// Models returns the provider for a model reference (env: references unresolved). nil
	// means NewModels(Env, nil).
	Models func(agent.ModelRef) (models.Provider, error)
	// DefaultModel applies when a session chose no model and svc.json has no models.main
	// (SVC_DEFAULT_MODEL). Zero: the echo model, with a warning frame.
	DefaultModel agent.ModelRef
	// Env resolves env: references (for /inspect/connections); nil means none resolve.
	Env func(name string) (string, bool)
	// SecretHint says how to set a variable that is not set, for the error result of a
	// connection call that needs it ("set it with `svc secrets set my-agent NAME` or in the
	// runner's environment"); nil says "set it as an agent secret or in the runtime's
	// environment". (The stores take theirs with stores.OpenParams.)
	SecretHint func(name string) string
	// CompositeMaxDepth bounds how deeply tools call tools (SVC_COMPOSITE_MAX_DEPTH) and
	// CompositeMaxCalls the calls tools make to tools in one turn (SVC_COMPOSITE_MAX_CALLS); 0
	// means 4 and 100.
	CompositeMaxDepth int
	CompositeMaxCalls int
	// Feedback keeps the ratings of POST /feedback; nil keeps the last 10,000 in memory.
	Feedback FeedbackStore
	// Tracer, when set, records a span per turn (with its model and tool calls) and done frames
	// carry its trace id; nil records nothing.
	Tracer trace.Tracer
	// Metrics, when set, counts turns, tokens and tool calls; share one among the runtimes of a
	// process.
	Metrics *Metrics
	// AllowMetadataAddresses lets connection calls reach link-local and cloud metadata
	// addresses (SVC_ALLOW_METADATA_ADDRESSES); they are refused by default.
	AllowMetadataAddresses bool
	// ConnectionTransport, when set, is the transport connection calls start from (tests);
	// its proxy and dialer are always replaced.
	ConnectionTransport *http.Transport
	// StoreBackend keeps the records of the agent's stores (svc/stores); nil means memory for
	// this runtime. Close closes it; when New fails, it stays the caller's to close.
	StoreBackend stores.Backend
	// Approvals records the approvals of tool calls and wakes the turns that wait for them;
	// share one among the runtimes of a process. nil means one in memory for this runtime.
	Approvals *approvals.Hub
	// ApprovalTimeout denies a call whose approval got no answer (SVC_APPROVAL_TIMEOUT); 0
	// means 10 minutes.
	ApprovalTimeout time.Duration
	// HandlerTimeout bounds one call (or one durable execution) of a handler tool
	// (SVC_HANDLER_TIMEOUT); 0 means 10 seconds.
	HandlerTimeout time.Duration
	// ParkAfter is how long a streamed turn runs before it is parked off the HTTP server's
	// connection, when the server serves a park.Listener (runner/park): a stream waiting for its
	// model then holds less memory. 0 means DefaultParkAfter; negative never parks.
	ParkAfter time.Duration
	// Sandbox runs the calls of the agent's handler tools (svc/tools), in worker processes
	// with hard limits; share one among the runtimes of a process. Required when the agent has
	// handler tools.
	Sandbox *sandbox.Pool
	// Durable runs the agent's durable tools (starts, answers, wakes and resumes their runs); share
	// one among the runtimes of a process. The runtime attaches its deployment to it in New and
	// detaches it in Close. nil means an engine of this runtime's own, in memory with timers:
	// its runs are lost with the runtime.
	Durable *engine.Engine
	// Events carries session_updated to the GET /api/events subscribers of every runtime of the
	// agent, in every process that shares it; nil means this runtime's subscribers only.
	Events EventBus
	// Automations serves /api/automations and fires store triggers (CONTRACT §9); share one
	// among the runtimes of a process. nil: the routes answer 404 saying why (svc dev).
	Automations *Automations
	// Channels serves the messaging channels of svc.json (/channels/...) and runs their
	// background work (RunChannel); share one among the runtimes of a process. nil: the routes
	// answer 404 saying why (svc dev).
	Channels *Channels
	// TurnLog keeps each session's last streamed turn for reattach and carries stops
	// (streams/redisstream across runners); nil means one in memory for this runtime.
	TurnLog TurnLog
	// MaxTurns is the model-turn limit of a run; 0 means 50.
	MaxTurns int
	// IdleTimeout evicts live sessions (and expires prepared ones); 0 means 30 minutes.
	IdleTimeout time.Duration
	// ContextWindow overrides the model's context window for compaction; 0 means the model's.
	ContextWindow int
	// ExtraTools are host-provided tools offered to every agent of this runtime, after the
	// agent's own (a tool of the same name replaces the agent's).
	ExtraTools []tools.Tool
	// Logger receives the runtime's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests move it to drive idle eviction.
	Now func() time.Time
}

// EventBus carries the runtime's bus events between the runtimes of an agent (events.Bus).
type EventBus interface {
	Publish(ctx context.Context, agentID string, f *sse.Frame) error
	Subscribe(agentID string, fn func(sse.Frame)) (cancel func())
}

// Runtime serves one agent. Create it with New, serve it with ServeHTTP, stop its background
// work with Close.
type Runtime struct {
	opts   Options
	ag     *agent.Agent
	store  sessions.Store
	models func(agent.ModelRef) (models.Provider, error)
	log    *slog.Logger
	now    func() time.Time
	idle   time.Duration
	// parkAfter is Options.ParkAfter with its default.
	parkAfter time.Duration
	// scopeRequired: svc.json's scope.requireScope applies to this runtime's routes (requireScope).
	scopeRequired bool
	mux           *http.ServeMux
	profiles      *turn.Profiles
	turns         *turn.Engine
	bus           *bus
	cache         *live.Cache // the sessions held in memory between requests
	blobs         sessions.Blobs
	bodies        *BodyBudget
	hub           *approvals.Hub
	records       *stores.Records
	conns         *connections.Client // nil without connections
	connHealth    connHealth
	backend       stores.Backend
	ownHub        bool // the hub is this runtime's: Close closes it
	feedbacks     FeedbackStore
	runs          *engine.Engine
	ownRuns       bool                            // the engine is this runtime's: Close shuts it down
	dep           engine.Deployment               // what runs needs to execute this runtime's runs
	detach        func(ctx context.Context) error // dep from runs
	// schemas compiles the parameter schemas of the runtime's tools once, for the model's calls
	// (the profiles' tool sets) and the handlers' ctx.callTool calls alike.
	schemas *tools.Schemas
	// durableHandler compiles a durable tool's handler (set by handlerTools).
	durableHandler func(*agent.Tool) (*handlers.Tool, error)
	unsubscribe    func() // from Options.Events
	signin         *signinRoutes
	auto           *automationRoutes
	channels       *channelRoutes
	mcp            *mcpRoutes
	// toolsChanged wakes rebuildTools: an MCP connection's tools may have changed.
	toolsChanged chan struct{}
	turnLog      TurnLog

	done   chan struct{}
	closed sync.Once
	wg     sync.WaitGroup
}

// New builds the runtime of opts.Agent and starts its idle eviction.
func New(opts Options) (*Runtime, error) {
	if opts.Agent == nil {
		return nil, errors.New("runtime: Options.Agent is required")
	}
	rt := &Runtime{
		opts: opts, ag: opts.Agent, store: opts.Sessions, models: opts.Models,
		log: opts.Logger, now: opts.Now, idle: opts.IdleTimeout,
		done: make(chan struct{}), bus: newBus(),
		blobs: opts.Blobs, bodies: opts.Bodies, scopeRequired: scopeRequired(&opts),
	}
	if rt.blobs == nil {
		rt.blobs = &memstore.Blobs{}
	}
	if rt.bodies == nil {
		rt.bodies = NewBodyBudget(0, 0)
	}
	if rt.store == nil {
		rt.store = memstore.New()
	}
	rt.runs = opts.Durable
	if rt.runs == nil {
		cfg := engine.Config{HandlerTimeout: opts.HandlerTimeout, Logger: opts.Logger, Now: opts.Now}
		if opts.Metrics != nil {
			cfg.Metrics = opts.Metrics
		}
		rt.runs = engine.New(cfg)
		if err := rt.runs.Start(nil); err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		rt.ownRuns = true
	}
	rt.feedbacks = opts.Feedback
	if rt.feedbacks == nil {
		rt.feedbacks = &memFeedback{}
	}
	rt.hub = opts.Approvals
	if rt.hub == nil {
		hub, err := approvals.NewHub(context.Background(), approvals.HubConfig{Store: &approvals.Memory{}, Logger: opts.Logger, Now: opts.Now})
		if err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		rt.hub, rt.ownHub = hub, true
	}
	locker := opts.Locker
	if locker == nil {
		locker = &memstore.Locks{}
	}
	if rt.models == nil {
		rt.models = NewModels(opts.Env, nil)
	}
	if rt.log == nil {
		rt.log = slog.Default()
	}
	if rt.now == nil {
		rt.now = time.Now
	}
	if rt.idle <= 0 {
		rt.idle = DefaultIdleTimeout
	}
	if rt.parkAfter = opts.ParkAfter; rt.parkAfter == 0 {
		rt.parkAfter = DefaultParkAfter
	}
	rt.turnLog = opts.TurnLog
	if rt.turnLog == nil {
		rt.turnLog = memstream.New(memstream.Config{Now: rt.now})
	}
	rt.cache = live.New(live.Config{Store: rt.store, AgentID: opts.AgentID, Shared: opts.SharedStore, Idle: rt.idle, Now: rt.now})
	if rt.opts.Version == "" {
		rt.opts.Version = rt.ag.Config.Version
	}
	rt.backend = opts.StoreBackend
	if rt.backend == nil {
		rt.backend = stores.NewMemory()
	}
	rt.auto = &automationRoutes{host: opts.Automations, ag: rt.ag, agentID: opts.AgentID, now: rt.now, log: rt.log}
	records, err := stores.New(stores.Params{Stores: rt.ag.Stores, Backend: rt.backend, Now: rt.now, OnWrite: rt.auto.storeWritten})
	if err != nil {
		return nil, fmt.Errorf("runtime: stores: %w", err)
	}
	rt.records = records
	rt.schemas = &tools.Schemas{}
	ext, err := rt.extensions()
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	rt.profiles = turn.NewProfiles(rt.ag, ext, opts.ExtraTools)
	var guard *agent.InputGuard // svc.json guardrails.preInput; nil checks nothing
	if g := rt.ag.Config.Guardrails; g != nil {
		if guard, err = g.PreInput.Compile(); err != nil {
			return nil, fmt.Errorf("runtime: svc.json: %w", err)
		}
	}
	turns, err := turn.NewEngine(turn.Config{
		Agent: rt.ag, AgentID: opts.AgentID, Profiles: rt.profiles, Cache: rt.cache, Store: rt.store,
		Blobs: rt.blobs, Locker: locker, Guard: guard, Storage: opts.Storage, Models: rt.models,
		DefaultModel: opts.DefaultModel, MaxTurns: opts.MaxTurns, ContextWindow: opts.ContextWindow,
		Approvals: rt.hub, ApprovalTimeout: opts.ApprovalTimeout, Observer: newTurnMetrics(opts.Metrics, rt.ag, opts.DefaultModel, rt.profiles.ToolNames()),
		Tracer: opts.Tracer, DeployID: opts.DeployID,
		Logger: rt.log, Now: rt.now,
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	rt.turns = turns
	if opts.Events != nil {
		rt.unsubscribe = opts.Events.Subscribe(opts.AgentID, func(f sse.Frame) { rt.bus.publish(&f) })
	}
	rt.dep = engine.Deployment{AgentID: opts.AgentID, DeployID: opts.DeployID, Tool: durableTool(rt.ag, opts.DeployID, rt.durableHandler), Notify: rt.bus.publish}
	rt.signin = &signinRoutes{cfg: opts.Access, agentID: opts.AgentID, env: opts.Env, log: rt.log}
	rt.channels = &channelRoutes{host: opts.Channels, cfg: rt.ag.Config.Channels, agentID: opts.AgentID, env: opts.Env, hint: opts.SecretHint,
		hub: rt.hub, turns: rt.turns, store: rt.store, now: rt.now, log: rt.log}
	rt.mcp = newMCPRoutes(rt)
	rt.routes()
	rt.detach = rt.runs.Attach(rt.dep)
	rt.wg.Add(1)
	go rt.evictLoop()
	if rt.conns != nil {
		rt.wg.Add(2)
		go rt.checkConnections()
		go rt.rebuildTools()
	}
	return rt, nil
}

// ServeHTTP implements http.Handler, cross-origin use allowed (CrossOrigin).
func (rt *Runtime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every request gets one log line, written when it is served (requestlog.go).
	start := time.Now()
	rl := &requestLog{ResponseWriter: w, note: &requestNote{}}
	r = r.WithContext(context.WithValue(r.Context(), requestLogKey{}, rl.note))
	defer rt.logRequest(r, rl, start)
	if CrossOrigin(rl, r) {
		return
	}
	rt.mux.ServeHTTP(rl, r) // sets r.Pattern and the path values the log line reads
}

// CrossOrigin lets pages of any origin call the runtime: its routes authenticate with a bearer
// token, never a cookie, so a page may call them with a token its backend minted. It marks the
// answer as readable from any origin and answers a browser's preflight (OPTIONS with
// Access-Control-Request-Method) itself, 204 without a token, reporting true when it did. The
// router calls it too, so that its own errors on agent hosts reach the page.
func CrossOrigin(w http.ResponseWriter, r *http.Request) (answered bool) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", "Retry-After, X-Vercel-Ai-Ui-Message-Stream, Mcp-Session-Id, WWW-Authenticate")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// Close detaches the runtime's deployment from its durable engine, which waits for the
// executions in flight on it and starts no more (past ctx it interrupts them: they resume from
// their journals), then stops idle eviction, ends /api/events streams and waits for both; it
// closes the store backend. It returns when all that is done, or when ctx ends.
func (rt *Runtime) Close(ctx context.Context) error {
	// The executions first: their handlers use the stores.
	var err error
	if rt.ownRuns {
		err = rt.runs.Shutdown(ctx)
	}
	if derr := rt.detach(ctx); derr != nil {
		err = errors.Join(err, fmt.Errorf("runtime: close: %w", derr))
	}
	rt.closed.Do(func() {
		close(rt.done)
		rt.mcp.stop() // the MCP turns waiting for an answer end
		if rt.ownHub {
			_ = rt.hub.Close() // a memory hub has nothing to fail
		}
		if rt.conns != nil {
			rt.conns.Close()
		}
		if cerr := rt.backend.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("runtime: close the stores: %w", cerr))
		}
	})
	if rt.unsubscribe != nil {
		rt.unsubscribe()
	}
	waited := make(chan struct{})
	go func() { rt.wg.Wait(); close(waited) }()
	select {
	case <-waited:
		return err
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("runtime: close: %w", context.Cause(ctx)))
	}
}

func (rt *Runtime) routes() {
	m := http.NewServeMux()
	runs := &durableRoutes{runs: rt.runs, dep: rt.dep}
	history := &historyRoutes{turns: rt.turns, store: rt.store, hub: rt.hub, agentID: rt.opts.AgentID, idle: rt.idle, now: rt.now, scopeRequired: rt.scopeRequired}
	records := storeRoutes{records: rt.records}
	m.HandleFunc("GET /health", rt.health)
	m.Handle("POST /chat", rt.handle(rt.chatStream))
	m.Handle("POST /chat/stream", rt.handle(rt.chatStream))
	m.Handle("POST /chat/sync", rt.handle(rt.chatSync))
	m.Handle("POST /chat/ai-stream", rt.handle(rt.chatAIStream))
	m.Handle("GET /chat/ai-stream/{id}/stream", rt.handle(rt.resumeAIStream))
	m.Handle("GET /chat/sessions/{id}/stream", rt.handle(rt.resumeStream))
	m.Handle("POST /chat/sessions/{id}/stop", rt.handle(rt.stopTurn))
	m.Handle("POST /chat/sessions/{id}/messages", rt.handle(history.queue))
	m.Handle("POST /chat/sessions/{id}/ask-user-response", rt.handle(history.answerApproval))
	m.Handle("POST /sessions", rt.handle(history.prepare))
	m.Handle("GET /sessions/history", rt.handle(history.list))
	m.Handle("GET /sessions/history/{id}", rt.handle(history.get))
	m.Handle("PATCH /sessions/history/{id}", rt.handle(history.patch))
	m.Handle("DELETE /sessions/history/{id}", rt.handle(history.delete))
	m.Handle("GET /sessions/pending-approvals", rt.handle(runs.pending))
	m.Handle("GET /stores/{store}", rt.handle(records.list))
	m.Handle("GET /stores/{store}/{key}", rt.handle(records.get))
	m.Handle("GET /stores/{store}/{key}/history", rt.handle(records.history))
	m.Handle("PUT /stores/{store}/{key}", rt.handle(records.put))
	m.Handle("DELETE /stores/{store}/{key}", rt.handle(records.delete))
	m.Handle("POST /feedback", rt.handle(rt.feedback))
	m.Handle("GET /inspect/context", rt.handle(rt.inspectContext))
	m.Handle("GET /inspect/connections/{name}", rt.handle(rt.inspectConnection))
	m.Handle("GET /api/events", rt.handle(rt.events))
	m.Handle("GET /api/sessions/{id}", rt.handle(runs.get))
	m.Handle("POST /api/sessions/{id}/answer", rt.handle(runs.answer))
	m.Handle("POST /api/sessions/{id}/cancel", rt.handle(runs.cancel))
	m.Handle("POST /api/sessions/{id}/restart", rt.handle(runs.restart))
	m.Handle("GET /api/automations", rt.handle(rt.auto.list))
	m.Handle("POST /api/automations", rt.handle(rt.auto.create))
	m.Handle("GET /api/automations/{id}", rt.handle(rt.auto.get))
	m.Handle("PATCH /api/automations/{id}", rt.handle(rt.auto.patch))
	m.Handle("DELETE /api/automations/{id}", rt.handle(rt.auto.remove))
	m.Handle("POST /api/automations/{id}/run", rt.handle(rt.auto.run))
	m.Handle("GET /api/automations/{id}/runs", rt.handle(rt.auto.runs))
	m.Handle("POST /api/automations/{id}/events", plain(rt.log, rt.auto.event))
	m.Handle("POST /channels/{channel}/webhook", plain(rt.log, rt.channels.webhook))
	m.Handle("POST /channels/slack/interactive", plain(rt.log, rt.channels.interactive))
	m.Handle("GET /auth/login", plain(rt.log, rt.signin.login))
	m.Handle("GET /auth/callback", plain(rt.log, rt.signin.callback))
	m.Handle("GET /auth/me", rt.handle(rt.signin.me))
	m.Handle("POST /auth/logout", rt.handle(rt.signin.logout))
	m.Handle("/mcp", rt.mcp)
	m.HandleFunc("GET /.well-known/oauth-protected-resource", rt.mcp.metadata)
	m.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", rt.mcp.metadata)
	m.HandleFunc("/", rt.noRoute)
	rt.mux = m
}

// noRoute answers a request that no route takes with the runtime's JSON error: 405 naming the
// methods when the path is a route's, else 404 naming the path.
func (rt *Runtime) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = method
		if _, pattern := rt.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, method)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, r, rt.log, &APIError{Code: CodeBadMethod, Message: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, strings.Join(allow, ", "), r.Method)})
		return
	}
	writeError(w, r, rt.log, &APIError{Code: CodeNotFound, Message: fmt.Sprintf("no route %s %s on this agent", r.Method, r.URL.Path)})
}

// handlerFunc is a route handler: it writes its answer, or returns an error for handle to write.
type handlerFunc func(w http.ResponseWriter, r *http.Request, who access.Identity) error

// handle authenticates the request, runs h, turns its error into the error body and recovers
// panics (STYLE 16, 25).
func (rt *Runtime) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				rt.log.ErrorContext(r.Context(), "handler panicked", "path", r.URL.Path, "panic", v)
				writeError(w, r, rt.log, apiErr(CodeInternal))
			}
		}()
		who, err := rt.authenticate(r)
		if err == nil {
			var release func()
			if release, err = rt.bodies.admit(r); err == nil {
				defer release()
			} else {
				w.Header().Set("Retry-After", "5")
			}
		}
		if err == nil {
			err = h(w, r, who)
		}
		if err != nil {
			writeError(w, r, rt.log, err)
		}
	})
}
