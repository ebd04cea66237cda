package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/term"
	"gorm.io/gorm"

	"svc/auth"
	"svc/builder"
	"svc/deploy"
	"svc/migrations"
	"svc/registry"
	"svc/registry/fsobjects"
	"svc/registry/s3objects"
	"svc/runner/durable/engine"
	"svc/runner/runtime"
	"svc/runner/sandbox"
	"svc/webhook"
	"svc/workers"
	"svc/workers/asynqqueue"
	"svc/workers/dbqueue"
)

// platform is what every server role stands on: the database, the object store, credentials,
// the deployment state machine and the build queue. The roles build on it what they run: the
// Deployer of the API (newAPI) and the build handler of the workers (buildMux).
type platform struct {
	cfg Config
	// chans is the channels host of this process's runtimes (set by newRouter): the channel
	// turns this process runs wait for its deliveries' acknowledgements (Channels.AfterAcks).
	chans     *runtime.Channels
	log       *slog.Logger
	db        *gorm.DB
	objects   registry.Objects
	signer    *auth.Signer
	secretKey []byte
	cipher    *registry.Cipher
	stores    *registry.Stores // every registry store, built once
	deploys   *registry.Deployments
	// revocations verifies runtime tokens and refuses those of revoked minters (runners).
	revocations *auth.Revocations
	// keys checks ak_ agent API keys for the runtimes (runners): cached, with revocations polled.
	keys    *auth.Keys
	queue   workers.Queue
	turns   workers.Queue // the lane of the turns the platform runs itself (turnTasks)
	closers []func() error
	// metrics is the process's Prometheus registry: the API's and the runtimes' metrics, on
	// GET /metrics of the platform's host (and of a runner's own host).
	metrics      *prometheus.Registry
	buildMetrics *workers.BuildMetrics
	// automationMetrics count the fires of automations this process runs.
	automationMetrics *workers.AutomationMetrics
	// tracer exports the process's spans when OTEL_EXPORTER_OTLP_ENDPOINT is set; nil otherwise.
	tracer trace.Tracer
	// sandbox runs the handlers of every runtime of the process (runners, evals).
	sandbox *sandbox.Pool
	// signingKey is SVC_SIGNING_KEY's value: the runtime-token key, and what the sign-in's state
	// key is derived from (signInKey).
	signingKey []byte
}

// newLogger builds the process logger: JSON unless the output is a terminal (or as configured).
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // validated by loadConfig
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(traceHandler{h})
}

// traceHandler adds the trace_id of the span in a record's context, when it is being traced, to
// every log line written with a context (the *Context methods of slog).
type traceHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

// openPlatform connects everything. embedded (svc up, svc dev) falls back to SQLite, the
// filesystem and the in-process queue under the data dir; the scale-out roles need the real
// services and shared keys, and say which setting is missing.
func openPlatform(ctx context.Context, cfg Config, log *slog.Logger, embedded bool) (_ *platform, err error) {
	p := &platform{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if !embedded {
		var missing []string
		for _, s := range []struct{ name, value string }{
			{"DATABASE_URL", cfg.DatabaseURL}, {"REDIS_URL", cfg.RedisURL}, {"SVC_S3_ENDPOINT", cfg.S3Endpoint},
			{"SVC_SIGNING_KEY", cfg.SigningKey}, {"SVC_SECRET_KEY", cfg.SecretKey},
		} {
			if s.value == "" {
				missing = append(missing, s.name)
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("this role runs beside others and needs shared services and keys: set %s (or use `svc up` for one process on embedded defaults)", strings.Join(missing, ", "))
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil && embedded {
		return nil, fmt.Errorf("setting SVC_DATA_DIR: create %s: %w", cfg.DataDir, err)
	}

	// 1. Database (migrated).
	dbURL := cfg.DatabaseURL
	if dbURL == "" {
		path := filepath.Join(cfg.DataDir, "svc.db")
		// svc's own database: private like the rest of the data dir, also when an older
		// version created it 0644.
		if err := migrations.RestrictSQLiteFiles(path); err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
		dbURL = "sqlite:" + path
	}
	if p.db, err = migrations.Open(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	p.closers = append(p.closers, func() error {
		sqlDB, err := p.db.DB()
		if err != nil {
			return err
		}
		return sqlDB.Close()
	})

	// 2. Object store.
	if cfg.S3Endpoint != "" {
		s3, err := s3objects.New(ctx, s3objects.Config{Endpoint: cfg.S3Endpoint, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey, UseSSL: cfg.S3UseSSL})
		if err != nil {
			return nil, fmt.Errorf("object store (SVC_S3_ENDPOINT): %w", err)
		}
		p.objects = registry.Checked(s3)
	} else {
		fsStore, err := fsobjects.New(filepath.Join(cfg.DataDir, "objects"))
		if err != nil {
			return nil, fmt.Errorf("object store: %w", err)
		}
		p.objects = registry.Checked(fsStore)
	}

	// 3. Keys and credentials.
	signingKey, err := cfg.key(cfg.SigningKey, "SVC_SIGNING_KEY", "signing-key", 32)
	if err != nil {
		return nil, err
	}
	if p.signer, err = auth.NewSigner(signingKey); err != nil {
		return nil, err
	}
	p.signingKey = signingKey
	if p.secretKey, err = cfg.key(cfg.SecretKey, "SVC_SECRET_KEY", "secret-key", 32); err != nil {
		return nil, err
	}
	p.secretKey = p.secretKey[:32]
	if p.cipher, err = registry.NewCipher(p.secretKey); err != nil {
		return nil, err
	}
	p.stores = registry.NewStores(p.db, p.cipher, p.objects, webhook.NormalizeRepoURL)
	p.revocations = auth.NewRevocations(p.signer, p.stores.Tokens, 0, log)
	p.keys = auth.NewKeys(auth.KeysParams{Store: p.stores.APIKeys, Logger: log})
	p.metrics = prometheus.NewRegistry()
	p.deploys = p.stores.Deployments

	// 4. Queue, in two lanes: the turns the platform runs itself (automation fires, channel
	// messages and replies; many at once) apart from builds,
	// evals and wake-ups, so that neither waits behind the other.
	if cfg.RedisURL != "" {
		q, err := asynqqueue.New(asynqqueue.Config{RedisURL: cfg.RedisURL, Concurrency: cfg.BuildConcurrency, PollInterval: cfg.QueuePollInterval, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("queue (REDIS_URL): %w", err)
		}
		p.queue = q
		p.closers = append(p.closers, q.Close)
		fq, err := asynqqueue.New(asynqqueue.Config{RedisURL: cfg.RedisURL, Queue: turnQueue, Concurrency: cfg.TurnConcurrency, PollInterval: cfg.QueuePollInterval, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("queue (REDIS_URL): %w", err)
		}
		p.turns = fq
		p.closers = append(p.closers, fq.Close)
	} else {
		// The data dir names the instance: a restart after a kill -9 takes back at once the
		// builds its dead predecessor had claimed, instead of waiting out their lease.
		instance, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("queue: data dir: %w", err)
		}
		lane := turnTasks
		q, err := dbqueue.New(p.db, dbqueue.Config{Concurrency: cfg.BuildConcurrency, Logger: log, Instance: instance, ExceptTypes: lane})
		if err != nil {
			return nil, fmt.Errorf("queue: %w", err)
		}
		p.queue = q
		if p.turns, err = dbqueue.New(p.db, dbqueue.Config{Concurrency: cfg.TurnConcurrency, Logger: log, Instance: instance, Types: lane}); err != nil {
			return nil, fmt.Errorf("queue: %w", err)
		}
	}
	if p.buildMetrics, err = workers.NewBuildMetrics(p.metrics); err != nil {
		return nil, err
	}
	if p.automationMetrics, err = workers.NewAutomationMetrics(p.metrics); err != nil {
		return nil, err
	}
	tracer, shutdown, err := newTracer(ctx, "platform", p.metrics)
	if err != nil {
		return nil, err
	}
	p.tracer = tracer
	p.closers = append(p.closers, func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return shutdown(sctx)
	})
	if err := workers.RegisterQueueMetrics(p.metrics, p.queue); err != nil {
		return nil, err
	}
	if p.sandbox, err = newSandbox(cfg.HandlerMemoryMB, cfg.HandlerProcs, log, p.metrics); err != nil {
		return nil, err
	}
	p.closers = append(p.closers, p.sandbox.Close)
	return p, nil
}

// bootstrap makes sure an admin token exists (registry.Tokens.Bootstrap). It returns the value
// of a token it created, saved in the data dir and to be printed once; "" otherwise.
func (p *platform) bootstrap(ctx context.Context) (string, error) {
	value, err := p.stores.Tokens.Bootstrap(ctx, p.cfg.BootstrapAdmin)
	if err != nil && p.cfg.BootstrapAdmin != "" {
		return "", fmt.Errorf("setting SVC_BOOTSTRAP_ADMIN_TOKEN: %w", err)
	}
	if err != nil || value == "" {
		return "", err
	}
	path := filepath.Join(p.cfg.DataDir, "admin-token")
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return value, nil
}

// buildMux is the queue's task routing: builds, evals, and the wake-ups of durable runs, which
// runs takes. commits, when not nil, is the cache this process's Deployer fills (svc up).
func (p *platform) buildMux(commits *workers.CommitCache, runs *engine.Engine) *workers.ServeMux {
	mux, evalPolicy := workers.NewServeMux(), p.newEvals()
	mux.Handle(workers.TaskDurableWake, &workers.WakeHandler{Wake: func(ctx context.Context, w workers.Wakeup) error {
		if err := runs.Wake(ctx, w.AgentID, w.RunID); err != nil {
			return fmt.Errorf("wake durable run %s: %w", w.RunID, err)
		}
		return nil
	}})
	mux.Handle(workers.TaskBuild, workers.NewBuildHandler(workers.BuildConfig{
		Deployments: p.deploys, Logs: p.stores.BuildLogs, Objects: p.objects, Sources: workers.NewRegistrySources(p.stores),
		Credentials: p.credentials(), Limits: builder.DefaultLimits(), Commits: commits, Metrics: p.buildMetrics, Tracer: p.tracer, Logger: p.log,
		Statuses: p.stores.CommitStatuses, OnReady: evalPolicy.AfterBuild,
	}))
	mux.Handle(workers.TaskEval, &workers.EvalHandler{Runs: p.stores.EvalRuns, Deployments: p.deploys, Statuses: p.stores.CommitStatuses,
		Run: p.runEvals, Notify: evalPolicy.Post, Logger: p.log})
	return mux
}

// newDeployer is the push and redeploy policy of the API. A push's fetched commit reaches its
// build through commits when this process runs the builds (svc up: commits is not nil), else
// through the object store, on whichever worker the build runs (svc api).
func (p *platform) newDeployer(commits *workers.CommitCache) *deploy.Deployer {
	return deploy.New(deploy.Config{
		Deployments: p.deploys, Queue: p.queue, Sources: workers.NewRegistrySources(p.stores), Pushes: p.stores.Pushes,
		Credentials: p.credentials(), Limits: builder.DefaultLimits(), Commits: commits, Objects: p.objects, Logger: p.log,
	})
}

// credentials resolves agents' git credentials: their secrets, then this process's environment.
func (p *platform) credentials() builder.Credentials {
	return builder.Credentials{Secrets: p.stores.Secrets}
}

func (p *platform) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		if err := p.closers[i](); err != nil && !errors.Is(err, context.Canceled) {
			p.log.Warn("close", "err", err)
		}
	}
}
