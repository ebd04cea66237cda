package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"svc/agent"
	"svc/api"
	"svc/console"
	"svc/groupcommit"
	"svc/registry"
	"svc/runner"
	"svc/runner/approvals"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/events"
	"svc/runner/runtime"
	"svc/runner/sessions"
	"svc/runner/sessions/dbstore"
	"svc/runner/sessions/memstore"
	"svc/runner/sessions/objblobs"
	"svc/runner/sessions/redislock"
	"svc/runner/stores"
	"svc/runner/streams/memstream"
	"svc/runner/streams/redisstream"
	"svc/runner/turn"
	"svc/workers"
)

// serverCommands are the roles: up (all in one), api, worker, runner, and dev.
func serverCommands() []*cobra.Command {
	return []*cobra.Command{
		roleCommand("up", "Run the whole platform in one process (embedded SQLite, filesystem objects, in-process queue unless configured)", forUp, roleUp),
		roleCommand("api", "Run the platform API and webhooks (needs DATABASE_URL, REDIS_URL, S3 and shared keys)", forAPI, roleAPI),
		roleCommand("worker", "Run build workers on the asynq queue (needs DATABASE_URL, REDIS_URL, S3 and shared keys)", forWorker, roleWorker),
		roleCommand("runner", "Serve agents at their persistent and pinned URLs (needs DATABASE_URL, REDIS_URL, S3 and shared keys)", forRunner, roleRunner),
		devCommand(),
	}
}

type roleFunc func(ctx context.Context, cmd *cobra.Command, cfg Config, log *slog.Logger) error

// roleCommand is the command of a role, declaring the settings of r.
func roleCommand(name, short string, r role, run roleFunc) *cobra.Command {
	cmd := &cobra.Command{Use: name, Short: short, Args: cobra.NoArgs}
	addFlags(cmd.Flags(), r)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(cmd.Flags())
		if err != nil {
			return err
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		applyMemoryLimit(log)
		if r == forRunner {
			applyGCPercent(log) // the one role whose memory is its streams (up and worker build bundles)
		}
		return run(cmd.Context(), cmd, cfg, log)
	}
	return cmd
}

// appsDomainFor is the apps domain as agent URLs show it: with the listen port unless it is 80.
func appsDomainFor(cfg Config, addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.Port != 80 && !strings.Contains(cfg.AppsDomain, ":") {
		return fmt.Sprintf("%s:%d", cfg.AppsDomain, tcp.Port)
	}
	return cfg.AppsDomain
}

// newRouter is the agent router of a platform: bundles from the object store, runtimes with the
// database session store and runtime-token verification; and the engine of their durable runs,
// started with the router as its loader of deployments. stopRouter stops both.
func (p *platform) newRouter(ctx context.Context) (*runner.Router, *engine.Engine, error) {
	// Runtime tokens of revoked minters are refused from the first request on.
	if err := p.revocations.Refresh(ctx); err != nil {
		return nil, nil, err
	}
	if err := p.keys.Refresh(ctx); err != nil {
		return nil, nil, err
	}
	var defaultModel agent.ModelRef
	if provider, model, ok := strings.Cut(p.cfg.DefaultModel, "/"); ok {
		defaultModel = agent.ModelRef{Provider: provider, Model: model}
	}
	store := dbstore.New(p.db)
	// Every runtime of this process (one per deployment) shares the store and one turn lock per
	// session: in Redis when runners share it, else in this process.
	var locker sessions.Locker = &memstore.Locks{}
	// Approvals live in the database, so that an answer may reach any runner; Redis, when
	// runners share it, wakes the waiting turn at once.
	hubCfg := approvals.HubConfig{Store: approvals.NewDB(p.db), Logger: p.log}
	var rdb *redis.Client
	if p.cfg.RedisURL != "" {
		opt, err := redis.ParseURL(p.cfg.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("setting REDIS_URL: %w", err)
		}
		rdb = redis.NewClient(opt)
		p.closers = append(p.closers, rdb.Close)
		locker = redislock.New(rdb, redislock.Config{Logger: p.log})
		hubCfg.Redis = rdb
	}
	// Turns that a dead process left running end now, interrupted, with what they streamed
	// (those whose lock a live runner holds are left alone).
	if n, err := turn.RecoverInterrupted(ctx, store, locker, time.Now); err != nil {
		p.log.Warn("end the turns a stopped process left running", "err", err)
	} else if n > 0 {
		p.log.Info("ended turns a stopped process left running", "count", n)
	}
	// Each session's last streamed turn, for reattach and stop: in Redis when runners share
	// it (any runner serves a reconnect, a stop reaches the runner of the turn), else in this
	// process.
	var turnLog runtime.TurnLog = memstream.New(memstream.Config{})
	if rdb != nil {
		tl, err := redisstream.New(ctx, redisstream.Config{Redis: rdb, Logger: p.log})
		if err != nil {
			return nil, nil, fmt.Errorf("turn log: %w", err)
		}
		p.closers = append(p.closers, tl.Close)
		turnLog = tl
	}
	hub, err := approvals.NewHub(ctx, hubCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("approvals: %w", err)
	}
	p.closers = append(p.closers, hub.Close)
	metrics, err := runtime.NewMetrics(p.metrics)
	if err != nil {
		return nil, nil, fmt.Errorf("runtime metrics: %w", err)
	}
	modelTransport := runtime.ModelTransport()
	modelTransport.Timeout = 10 * time.Minute // a timer per call, where http.Client.Timeout starts a goroutine
	httpClient := &http.Client{Transport: modelTransport}
	bodies := runtime.NewBodyBudget(p.cfg.BodyMemoryMB<<20, 0) // one budget for every runtime of the process
	// session_updated reaches the /api/events subscribers of every runner through Redis.
	var shared redis.UniversalClient // nil, not a nil *redis.Client, without Redis
	if rdb != nil {
		shared = rdb
	}
	bus, err := events.New(ctx, shared, p.log)
	if err != nil {
		return nil, nil, fmt.Errorf("events: %w", err)
	}
	p.closers = append(p.closers, bus.Close)
	journals := durable.NewDB(p.db)
	if err := runtime.ParkedRuns(p.metrics, journals.CountByStatus); err != nil {
		return nil, nil, fmt.Errorf("durable metrics: %w", err)
	}
	// One engine runs the durable runs of every runtime of the process; their wake-ups are queue
	// tasks, which any worker's engine takes (buildMux).
	runs := engine.New(engine.Config{Store: journals, Events: bus, Metrics: metrics, HandlerTimeout: p.cfg.HandlerTimeout, Logger: p.log,
		Schedule: func(ctx context.Context, w engine.Wakeup) error {
			return workers.EnqueueWakeup(ctx, p.queue, workers.Wakeup{AgentID: w.AgentID, DeployID: w.DeployID, RunID: w.RunID, At: w.At})
		}})
	// The automation routes of every runtime: their store, and the queue lane of their fires.
	automations := p.automationHost()
	// The sign-in of every runtime of the process: one provider cache, one session cache.
	signIn, err := p.newAccess(p.signingKey)
	if err != nil {
		return nil, nil, err
	}
	chans := p.channelHost()
	p.chans = chans
	router, err := runner.NewRouter(runner.Config{
		Resolver: p.deploys, Changes: deploymentChanges(rdb), Lookup: p.deploys.Get, AppsDomain: strings.Split(p.cfg.AppsDomain, ":")[0], Logger: p.log, Reporter: p.deploys,
		LoadBundle: p.loadAgent,
		NewRuntime: func(ctx context.Context, a *agent.Agent, d registry.Deployment) (runner.Runtime, error) {
			env, hint := p.envOf(d.AgentID), p.secretHint(ctx, d.AgentID)
			// The agent's stores: in its own database when svc.json names one (opened at their
			// first use, so that an unset url fails only them), else in the platform's, rows
			// kept apart by agent id.
			backend, err := stores.Open(ctx, stores.OpenParams{Config: a.Config.Stores, AgentID: d.AgentID, Env: env, Hint: hint, Platform: p.db})
			if err != nil {
				return nil, err
			}
			rt, err := runtime.New(runtime.Options{
				Agent: a, AgentID: d.AgentID, DeployID: d.ID, Sessions: store, Locker: locker, SharedStore: true, Verifier: p.revocations, Keys: p.keys, Access: signIn,
				Blobs: objblobs.New(p.objects, d.AgentID), Bodies: bodies, Approvals: hub, ApprovalTimeout: p.cfg.ApprovalTimeout,
				AllowMetadataAddresses: p.cfg.AllowMetadata, Metrics: metrics, Tracer: p.tracer,
				CompositeMaxDepth: p.cfg.CompositeMaxDepth, CompositeMaxCalls: p.cfg.CompositeMaxCalls,
				HandlerTimeout: p.cfg.HandlerTimeout, ParkAfter: p.cfg.ParkAfter, Sandbox: p.sandbox, Durable: runs, Events: bus,
				Feedback: p.stores.Feedback, Automations: automations, Channels: chans, TurnLog: turnLog,
				Storage: turn.StorageLimits{SessionBytes: p.cfg.SessionStorageMB << 20, AgentBytes: p.cfg.AgentStorageMB << 20},
				Models:  runtime.NewModels(env, httpClient), DefaultModel: defaultModel, Env: env, SecretHint: hint,
				IdleTimeout: time.Duration(p.cfg.RuntimeIdleMinutes) * time.Minute,
				Logger:      p.log.With("agent_id", d.AgentID, "deploy_id", d.ID), StoreBackend: backend,
			})
			if err != nil {
				_ = backend.Close() // the runtime never took it
				return nil, err
			}
			return rt, nil
		},
	})
	if err != nil {
		return nil, nil, err
	}
	p.countDeploymentChanges(rdb)
	// A run resumes on the deployment that started it: loading it attaches its runtime.
	if err := runs.Start(func(ctx context.Context, deployID string) error {
		_, err := router.Deployment(ctx, deployID)
		return err
	}); err != nil {
		return nil, nil, err
	}
	return router, runs, nil
}

// changesKey is the Redis counter of deployment changes that every process sharing the Redis
// raises and every router reads (runner.Config.Changes).
const changesKey = "svc:deployments:changes"

// changesTimeout bounds a read of the change counter (a router that cannot read it reads the
// deployment from the database).
const changesTimeout = time.Second

// countDeploymentChanges raises the shared change counter after every deployment change this
// process commits (activate, promote, rollback, a build's run and end, runtime stop and start),
// before the call that made the change returns: a router of any process sharing the Redis
// reads the counter at each request, so no request made after the call returned reaches the
// deployment it replaced. Without Redis there is no other process to tell (the router of this
// process drops its hosts by itself). A failed raise is logged; the routers then see the change
// within their HostTTL (1 s).
func (p *platform) countDeploymentChanges(rdb *redis.Client) {
	if rdb == nil {
		return
	}
	cancel := p.deploys.Watch(func() {
		ctx, done := context.WithTimeout(context.Background(), time.Second)
		defer done()
		if err := rdb.Incr(ctx, changesKey).Err(); err != nil {
			p.log.Warn("count a deployment change", "err", err)
		}
	})
	p.closers = append(p.closers, func() error { cancel(); return nil })
}

// deploymentChanges reads the shared change counter for the router (0 before the first change).
// Concurrent reads share one GET (a group commit of reads): each request is answered by a GET
// that started after it came, so it still sees every change made before it, and a burst of
// requests (200 channel deliveries at once) costs a few round trips instead of one each.
func deploymentChanges(rdb *redis.Client) func(context.Context) (uint64, error) {
	if rdb == nil {
		return nil
	}
	g := &groupcommit.Group[struct{}, uint64]{Run: func(ins []struct{}) ([]uint64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), changesTimeout)
		defer cancel()
		n, err := rdb.Get(ctx, changesKey).Uint64()
		if errors.Is(err, redis.Nil) {
			n, err = 0, nil
		}
		if err != nil {
			return nil, err
		}
		out := make([]uint64, len(ins))
		for i := range out {
			out[i] = n
		}
		return out, nil
	}}
	return func(context.Context) (uint64, error) { return g.Do(struct{}{}) }
}

// countFromAPI is countDeploymentChanges for a process without a router (svc api), on a Redis
// client of its own closed with the platform.
func (p *platform) countFromAPI() error {
	if p.cfg.RedisURL == "" {
		return nil
	}
	opt, err := redis.ParseURL(p.cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("setting REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(opt)
	p.closers = append(p.closers, rdb.Close)
	p.countDeploymentChanges(rdb)
	return nil
}

// stopRouter shuts the durable engine down, then closes the router's runtimes. The executions
// in flight get shutdownGrace; those still running then are interrupted, and their runs resume
// from their journals at their leases' wake-ups. A second call does nothing more.
func (p *platform) stopRouter(router *runner.Router, runs *engine.Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := runs.Shutdown(ctx); err != nil {
		p.log.Warn("stop the durable runs", "err", err)
	}
	router.Close()
}

// envOf resolves env: references of an agent: its secrets first, then the process environment.
// Each call reads them again, so a secret set meanwhile is seen by the next use; what keeps a
// value is what opened with it (a stores database, a model's provider), for the runtime's life.
func (p *platform) envOf(agentID string) func(string) (string, bool) {
	secrets := p.stores.Secrets
	return func(name string) (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if v, ok, err := secrets.Resolve(ctx, agentID, name); err == nil && ok {
			return v, true
		} else if err != nil {
			p.log.Warn("resolve agent secret", "agent_id", agentID, "name", name, "err", err)
		}
		return os.LookupEnv(name)
	}
}

// secretHint says how to set a variable of agentID that is not set, in the errors of what
// needs it: with the CLI command of the agent's slug (its id when the agent cannot be read).
func (p *platform) secretHint(ctx context.Context, agentID string) func(name string) string {
	ref := agentID
	if a, err := p.stores.Agents.Get(ctx, agentID); err == nil {
		ref = a.Slug
	}
	return func(name string) string {
		return fmt.Sprintf("set it with `svc secrets set %s %s` or in the runner's environment", ref, name)
	}
}

// newAPI is the platform API; commits, when not nil, is shared with the build handler of this
// process (svc up).
func (p *platform) newAPI(appsDomain string, runtimes api.RuntimeControl, commits *workers.CommitCache) (*api.API, error) {
	return api.New(api.Deps{
		Stores: p.stores, Objects: p.objects, Tokens: p.stores.Tokens, APIKeys: p.stores.APIKeys, Signer: p.signer,
		AppsDomain: appsDomain, Logger: p.log, Metrics: p.metrics, MetricsToken: p.cfg.MetricsToken, Tracer: p.tracer, Evals: p.newEvals().Queue, Deployer: p.newDeployer(commits), Runtimes: runtimes,
	})
}

// withConsole serves the console (package console) at /console and /console/... on the
// platform's host beside the API; the console talks to the API like any client.
func withConsole(appsDomain string, platform http.Handler) (http.Handler, error) {
	c, err := console.New(console.Config{AppsDomain: appsDomain})
	if err != nil {
		return nil, err
	}
	return console.Wrap(c, platform), nil
}

// hostSplit sends agent hosts to the router and every other host to the platform.
func hostSplit(router *runner.Router, platform http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if router != nil && router.Match(r) {
			router.ServeHTTP(w, r)
			return
		}
		platform.ServeHTTP(w, r)
	})
}

// runQueue processes the queue's tasks until ctx is done, after re-enqueueing builds left
// queued, and the turns lane: the automation fires its scheduler enqueues and the channels'
// messages and replies (the outbox sweep enqueues again the sending of replies whose task was
// lost). commits, when not nil, is shared with the API of this process (svc up);
// runs takes the wake-ups of durable runs, and router runs the turns.
func (p *platform) runQueue(ctx context.Context, commits *workers.CommitCache, router *runner.Router, runs *engine.Engine) error {
	if n, err := workers.RecoverBuilds(ctx, p.queue, p.deploys); err != nil {
		p.log.Warn("re-enqueue queued builds", "err", err)
	} else if n > 0 {
		p.log.Info("re-enqueued queued builds", "count", n)
	}
	turns := workers.NewServeMux()
	turns.Handle(workers.TaskAutomationFire, workers.NewAutomationFireHandler(workers.AutomationFireConfig{
		Automations: p.stores.Automations, Queue: p.turns, Run: p.runAutomation(router), Metrics: p.automationMetrics, Logger: p.log,
	}))
	p.handleChannels(turns, router)
	scheduler := workers.NewScheduler(workers.SchedulerConfig{Automations: p.stores.Automations, Queue: p.turns,
		Interval: p.cfg.AutomationTick, StaleAfter: 10 * p.cfg.AutomationTick, Metrics: p.automationMetrics, Logger: p.log})
	// Replies whose channel:send task was lost are sent all the same.
	outbox := &workers.OutboxSweeper{Store: p.stores.Channels, Queue: p.turns, Logger: p.log}
	return runGroup(ctx,
		func(ctx context.Context) error { return p.queue.Run(ctx, p.buildMux(commits, runs)) },
		func(ctx context.Context) error { return p.turns.Run(ctx, turns) },
		scheduler.Run,
		outbox.Run,
	)
}

func roleUp(ctx context.Context, cmd *cobra.Command, cfg Config, log *slog.Logger) error {
	// Listen first: a busy port fails before the data dir, its database or an admin token exist.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("setting SVC_ADDR: listen on %s: %w", cfg.Addr, err)
	}
	defer ln.Close() //nolint:errcheck // closed by the server on the normal path; this covers early returns
	p, err := openPlatform(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer p.close()
	token, err := p.bootstrap(ctx)
	if err != nil {
		return err
	}
	router, runs, err := p.newRouter(ctx)
	if err != nil {
		return err
	}
	defer p.stopRouter(router, runs)
	appsDomain := appsDomainFor(cfg, ln.Addr())
	// Webhooks and builds share this process: a pushed commit reaches its build in memory
	// (svc api stores it in the object store for the workers instead).
	commits := workers.NewCommitCache(8, 5*time.Minute)
	a, err := p.newAPI(appsDomain, router, commits)
	if err != nil {
		return err
	}
	platformHandler, err := withConsole(appsDomain, a.Handler())
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "svc up (version %s)\n  platform API  http://%s\n  agents        http://<slug>.%s\n  data dir      %s\n", version, ln.Addr(), appsDomain, cfg.DataDir)
	if token != "" {
		fmt.Fprintf(out, "  admin token   %s\n                (shown once; also saved to %s/admin-token)\n", token, cfg.DataDir)
	}
	return runGroup(ctx,
		func(ctx context.Context) error {
			return serveListener(ctx, ln, hostSplit(router, platformHandler), func(context.Context) { p.stopRouter(router, runs) })
		},
		func(ctx context.Context) error { return p.runQueue(ctx, commits, router, runs) },
		p.revocations.Run,
		p.keys.Run,
	)
}

func roleAPI(ctx context.Context, cmd *cobra.Command, cfg Config, log *slog.Logger) error {
	p, err := openPlatform(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer p.close()
	if _, err := p.bootstrap(ctx); err != nil {
		return err
	}
	if err := p.countFromAPI(); err != nil {
		return err
	}
	a, err := p.newAPI(cfg.AppsDomain, nil, nil)
	if err != nil {
		return err
	}
	platformHandler, err := withConsole(cfg.AppsDomain, a.Handler())
	if err != nil {
		return err
	}
	return serve(ctx, cfg.Addr, platformHandler, func(addr net.Addr) {
		fmt.Fprintf(cmd.OutOrStdout(), "svc %s api on http://%s\n", version, addr)
	}, nil)
}

func roleWorker(ctx context.Context, cmd *cobra.Command, cfg Config, log *slog.Logger) error {
	p, err := openPlatform(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer p.close()
	redisAt := "(unparsable REDIS_URL)"
	if u, err := url.Parse(cfg.RedisURL); err == nil {
		redisAt = u.Redacted()
	}
	// Wake-ups of durable runs run here, on the runtimes of their deployments.
	router, runs, err := p.newRouter(ctx)
	if err != nil {
		return err
	}
	defer p.stopRouter(router, runs)
	fmt.Fprintf(cmd.OutOrStdout(), "svc %s worker on %s\n", version, redisAt)
	jobs := []func(context.Context) error{func(ctx context.Context) error { return p.runQueue(ctx, nil, router, runs) }, p.revocations.Run, p.keys.Run}
	if cfg.MetricsAddr != "" {
		// A worker has no HTTP side of its own: its build, queue and durable metrics are
		// served here when asked for.
		metrics := api.MetricsHandler(p.metrics, cfg.MetricsToken)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/metrics":
				metrics.ServeHTTP(w, r)
			case "/health":
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"status":"ok","role":"worker"}`)) // the client may be gone
			default:
				http.NotFound(w, r)
			}
		})
		jobs = append(jobs, func(ctx context.Context) error {
			return serve(ctx, cfg.MetricsAddr, h, func(addr net.Addr) {
				fmt.Fprintf(cmd.OutOrStdout(), "svc %s worker metrics on http://%s/metrics\n", version, addr)
			}, nil)
		})
	}
	return runGroup(ctx, jobs...)
}

func roleRunner(ctx context.Context, cmd *cobra.Command, cfg Config, log *slog.Logger) error {
	p, err := openPlatform(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer p.close()
	router, runs, err := p.newRouter(ctx)
	if err != nil {
		return err
	}
	defer p.stopRouter(router, runs)
	metrics := api.MetricsHandler(p.metrics, cfg.MetricsToken)
	health := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/health" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok","role":"runner"}`)) // the client may be gone
			return
		}
		router.ServeHTTP(w, r) // answers 404 NOT_FOUND for a host that names no agent
	})
	return runGroup(ctx,
		func(ctx context.Context) error {
			return serve(ctx, cfg.Addr, hostSplit(router, health), func(addr net.Addr) {
				fmt.Fprintf(cmd.OutOrStdout(), "svc %s runner on http://%s (agents at http://<slug>.%s)\n", version, addr, cfg.AppsDomain)
			}, func(context.Context) { p.stopRouter(router, runs) })
		},
		p.revocations.Run,
		p.keys.Run,
	)
}
