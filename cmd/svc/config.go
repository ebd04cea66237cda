package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"svc/migrations"
	"svc/runner/channels/slack"
	"svc/runner/channels/telegram"
	"svc/runner/runtime"
	"svc/runner/sandbox"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
)

// Config is every setting of the svc binary. Each is one flag, one environment variable and one
// default, declared once in settings(); the README's reference table lists the same.
type Config struct {
	Addr               string
	AppsDomain         string
	DataDir            string
	DatabaseURL        string
	RedisURL           string
	S3Endpoint         string
	S3Bucket           string
	S3AccessKey        string
	S3SecretKey        string
	S3UseSSL           bool
	BootstrapAdmin     string
	SigningKey         string
	SecretKey          string
	DefaultModel       string
	LogFormat          string
	LogLevel           string
	BuildConcurrency   int
	QueuePollInterval  time.Duration
	AutomationTick     time.Duration
	TurnConcurrency    int
	MetricsAddr        string
	MetricsToken       string
	RuntimeIdleMinutes int
	SessionStorageMB   int64
	AgentStorageMB     int64
	BodyMemoryMB       int64
	ApprovalTimeout    time.Duration
	HandlerTimeout     time.Duration
	ParkAfter          time.Duration // runtime.Options.ParkAfter (SVC_PARK_AFTER)
	HandlerMemoryMB    int
	HandlerProcs       int
	EvalMaxTokens      int
	PublicURL          string
	AllowMetadata      bool
	CompositeMaxDepth  int
	CompositeMaxCalls  int
	EvalJudgeModel     string
	EvalRuns           int
	SlackAPIURL        string
	TelegramAPIURL     string
}

type setting struct {
	flag, env, def, help string
	bind                 func(c *Config, v string) error
	secret               bool
	// roles are the commands that read the setting: only they declare its flag and read its
	// environment variable; the others use the default.
	roles role
	// kind is the value's type as --help shows it: "" (string), "bool", "int" or "duration".
	kind string
}

// role is a set of the commands that read settings.
type role uint8

// The commands that read settings.
const (
	forUp role = 1 << iota
	forAPI
	forWorker
	forRunner
	forMigrate

	// servers are the roles that open the platform; runtimes those that run agents (and evals).
	servers  = forUp | forAPI | forWorker | forRunner
	runtimes = forUp | forWorker | forRunner
)

func str(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

func settings() []setting {
	return []setting{
		{flag: "addr", roles: forUp | forAPI | forRunner, env: "SVC_ADDR", def: "127.0.0.1:8080", help: "listen address of up, api and runner", bind: str(func(c *Config) *string { return &c.Addr })},
		{flag: "apps-domain", roles: servers, env: "SVC_APPS_DOMAIN", def: "apps.localhost", help: "domain whose subdomains serve agents", bind: str(func(c *Config) *string { return &c.AppsDomain })},
		{flag: "data-dir", roles: forUp | forMigrate, env: "SVC_DATA_DIR", def: "./.svc", help: "embedded database, objects and keys of svc up", bind: str(func(c *Config) *string { return &c.DataDir })},
		{flag: "database-url", roles: servers | forMigrate, env: "DATABASE_URL", def: "", help: "postgres:// URL; empty: SQLite in the data dir", bind: str(func(c *Config) *string { return &c.DatabaseURL }), secret: true},
		{flag: "redis-url", roles: servers, env: "REDIS_URL", def: "", help: "redis:// URL of the asynq queue; empty: the in-process queue", bind: str(func(c *Config) *string { return &c.RedisURL }), secret: true},
		{flag: "s3-endpoint", roles: servers, env: "SVC_S3_ENDPOINT", def: "", help: "S3 host:port; empty: objects in the data dir", bind: str(func(c *Config) *string { return &c.S3Endpoint })},
		{flag: "s3-bucket", roles: servers, env: "SVC_S3_BUCKET", def: "svc", help: "S3 bucket (created when missing)", bind: str(func(c *Config) *string { return &c.S3Bucket })},
		{flag: "s3-access-key", roles: servers, env: "SVC_S3_ACCESS_KEY", def: "", help: "S3 access key", bind: str(func(c *Config) *string { return &c.S3AccessKey })},
		{flag: "s3-secret-key", roles: servers, env: "SVC_S3_SECRET_KEY", def: "", help: "S3 secret key", bind: str(func(c *Config) *string { return &c.S3SecretKey }), secret: true},
		{flag: "s3-use-ssl", roles: servers, kind: "bool", env: "SVC_S3_USE_SSL", def: "false", help: "use https for S3", bind: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.S3UseSSL = b
			return err
		}},
		{flag: "bootstrap-admin-token", roles: forUp | forAPI, env: "SVC_BOOTSTRAP_ADMIN_TOKEN", def: "", help: "pk_ value made a valid admin token at start", bind: str(func(c *Config) *string { return &c.BootstrapAdmin }), secret: true},
		{flag: "signing-key", roles: servers, env: "SVC_SIGNING_KEY", def: "", help: "runtime-token key (hex or base64, >= 32 bytes); empty: generated into the data dir", bind: str(func(c *Config) *string { return &c.SigningKey }), secret: true},
		{flag: "secret-key", roles: servers, env: "SVC_SECRET_KEY", def: "", help: "AES-256 key for agent secrets at rest (hex or base64, 32 bytes); empty: generated into the data dir", bind: str(func(c *Config) *string { return &c.SecretKey }), secret: true},
		{flag: "default-model", roles: runtimes, env: "SVC_DEFAULT_MODEL", def: "", help: "provider/model used when svc.json names none", bind: str(func(c *Config) *string { return &c.DefaultModel })},
		{flag: "log-format", roles: servers, env: "SVC_LOG_FORMAT", def: "", help: "json or text; empty: text on a terminal, json otherwise", bind: str(func(c *Config) *string { return &c.LogFormat })},
		{flag: "log-level", roles: servers, env: "SVC_LOG_LEVEL", def: "info", help: "debug, info, warn or error", bind: str(func(c *Config) *string { return &c.LogLevel })},
		{flag: "build-concurrency", roles: forUp | forWorker, kind: "int", env: "SVC_BUILD_CONCURRENCY", def: "4", help: "builds run at once by one worker", bind: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err == nil && n < 1 {
				err = errors.New("must be at least 1")
			}
			c.BuildConcurrency = n
			return err
		}},
		{flag: "queue-poll-interval", roles: forUp | forWorker, kind: "duration", env: "SVC_QUEUE_POLL_INTERVAL", def: "50ms", help: "how often an idle worker asks Redis for queued builds and due retries (asynq; a Go duration, 10ms to 10s): lower picks a build up sooner, at more Redis calls",
			bind: func(c *Config, v string) error {
				d, err := time.ParseDuration(v)
				if err == nil && (d < 10*time.Millisecond || d > 10*time.Second) {
					err = errors.New("must be from 10ms to 10s")
				}
				c.QueuePollInterval = d
				return err
			}},
		{flag: "turn-concurrency", roles: forUp | forWorker, kind: "int", env: "SVC_TURN_CONCURRENCY", def: "16", help: "turns the platform runs itself (automation fires, channel messages and replies) run at once by one worker, in their own queue lane apart from builds", bind: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err == nil && (n < 1 || n > 1024) {
				err = errors.New("must be from 1 to 1024")
			}
			c.TurnConcurrency = n
			return err
		}},
		{flag: "automation-tick", roles: forUp | forWorker, kind: "duration", env: "SVC_AUTOMATION_TICK", def: "1s", help: "how often a worker looks for due automations (a Go duration, 100ms to 1m): the most a fire waits past its time, besides the queue; a queued fire whose task was lost is enqueued again after ten of these",
			bind: func(c *Config, v string) error {
				d, err := time.ParseDuration(v)
				if err == nil && (d < 100*time.Millisecond || d > time.Minute) {
					err = errors.New("must be from 100ms to 1m")
				}
				c.AutomationTick = d
				return err
			}},
		{flag: "metrics-addr", roles: forWorker, env: "SVC_METRICS_ADDR", def: "", help: "listen address of svc worker's GET /metrics and GET /health (empty: none; the other roles serve them on their own address)",
			bind: func(c *Config, v string) error {
				if v != "" {
					if _, _, err := net.SplitHostPort(v); err != nil {
						return fmt.Errorf("must be host:port, such as 127.0.0.1:9090: %w", err)
					}
				}
				c.MetricsAddr = v
				return nil
			}},
		{flag: "metrics-token", roles: servers, env: "SVC_METRICS_TOKEN", def: "", help: "bearer token GET /metrics needs on every role that serves it (at least 16 characters, no spaces); empty: /metrics is open",
			bind: func(c *Config, v string) error {
				if v != "" && (len(v) < 16 || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f })) {
					return errors.New("must be at least 16 characters without spaces or control characters")
				}
				c.MetricsToken = v
				return nil
			}, secret: true},
		{flag: "runtime-idle-minutes", roles: runtimes, kind: "int", env: "SVC_RUNTIME_IDLE_MINUTES", def: "30", help: "minutes without requests after which a runtime drops a session from memory: a session prepared with POST /sessions and never used expires (its idle_ttl_ms); a stored session stays in the store", bind: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err == nil && n < 1 {
				err = errors.New("must be at least 1")
			}
			c.RuntimeIdleMinutes = n
			return err
		}},
		{flag: "session-storage-mb", roles: runtimes, kind: "int", env: "SVC_SESSION_STORAGE_MB", def: "100", help: "MiB of history (text and attachments) one session may hold; past it a message gets 413 session_storage_full",
			bind: mebibytes(func(c *Config) *int64 { return &c.SessionStorageMB })},
		{flag: "agent-storage-mb", roles: runtimes, kind: "int", env: "SVC_AGENT_STORAGE_MB", def: "10240", help: "MiB of history all of an agent's sessions may hold; past it a message gets 429 agent_storage_full",
			bind: mebibytes(func(c *Config) *int64 { return &c.AgentStorageMB })},
		{flag: "body-memory-mb", roles: runtimes, kind: "int", env: "SVC_BODY_MEMORY_MB", def: "512", help: "MiB of memory a runner's large chat bodies in flight may take (each counted at 12x its size); past it they wait, then get 503 server_busy",
			bind: mebibytes(func(c *Config) *int64 { return &c.BodyMemoryMB })},
		{flag: "allow-metadata-addresses", roles: runtimes, kind: "bool", env: "SVC_ALLOW_METADATA_ADDRESSES", def: "false", help: "let connection calls reach link-local and cloud metadata addresses (169.254.0.0/16, fd00:ec2::254, metadata.google.internal...), refused by default",
			bind: func(c *Config, v string) error {
				b, err := strconv.ParseBool(v)
				if err != nil {
					err = errors.New("must be true or false")
				}
				c.AllowMetadata = b
				return err
			}},
		{flag: "composite-max-depth", roles: runtimes, kind: "int", env: "SVC_COMPOSITE_MAX_DEPTH", def: "4", help: "how deeply tools of svc/tools may call tools (ctx.callTool), 1 to 32",
			bind: bounded(1, 32, func(c *Config) *int { return &c.CompositeMaxDepth })},
		{flag: "composite-max-calls", roles: runtimes, kind: "int", env: "SVC_COMPOSITE_MAX_CALLS", def: "100", help: "calls tools of svc/tools may make to tools in one turn, 1 to 10000",
			bind: bounded(1, 10000, func(c *Config) *int { return &c.CompositeMaxCalls })},
		{flag: "eval-judge-model", roles: forUp | forWorker, env: "SVC_EVAL_JUDGE_MODEL", def: "", help: "provider/model that judges eval assertions no rule recognises; empty: the agent's own model",
			bind: func(c *Config, v string) error {
				if v != "" {
					if _, err := runtime.ParseModel(v); err != nil {
						return err
					}
				}
				c.EvalJudgeModel = v
				return nil
			}},
		{flag: "eval-max-session-tokens", roles: forUp | forWorker, kind: "int", env: "SVC_EVAL_MAX_SESSION_TOKENS", def: "200000", help: "tokens one eval run's session may spend (its max_session_tokens), 1,000 to 10,000,000",
			bind: bounded(1000, 10_000_000, func(c *Config) *int { return &c.EvalMaxTokens })},
		{flag: "public-url", roles: forUp | forWorker, env: "SVC_PUBLIC_URL", def: "", help: "the platform API's address as git hosts and browsers reach it (http or https), for links to eval results in commit statuses; empty: no links",
			bind: func(c *Config, v string) error {
				v = strings.TrimRight(v, "/")
				if v != "" {
					u, err := url.Parse(v)
					if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
						return errors.New("want an absolute http or https URL such as https://svc.example.com")
					}
				}
				c.PublicURL = v
				return nil
			}},
		{flag: "slack-api-url", roles: runtimes, env: "SVC_SLACK_API_URL", def: slack.DefaultBaseURL, help: "root of Slack's Web API the messaging channels post replies to (tests, proxies)",
			bind: apiURL(func(c *Config) *string { return &c.SlackAPIURL })},
		{flag: "telegram-api-url", roles: runtimes, env: "SVC_TELEGRAM_API_URL", def: telegram.DefaultBaseURL, help: "root of Telegram's Bot API the messaging channels post replies to (tests, proxies, a local Bot API server)",
			bind: apiURL(func(c *Config) *string { return &c.TelegramAPIURL })},
		{flag: "eval-runs", roles: forUp | forWorker, kind: "int", env: "SVC_EVAL_RUNS", def: "1", help: "how many times each eval runs; it passes when every run passes (1 to 10)",
			bind: bounded(1, 10, func(c *Config) *int { return &c.EvalRuns })},
		{flag: "approval-timeout", roles: runtimes, kind: "duration", env: "SVC_APPROVAL_TIMEOUT", def: "10m", help: "how long a tool call waits for the user's approval before it is denied (a Go duration, 1s to 168h)",
			bind: func(c *Config, v string) error {
				d, err := ParseApprovalTimeout(v)
				c.ApprovalTimeout = d
				return err
			}},
		{flag: "handler-timeout", roles: runtimes, kind: "duration", env: "SVC_HANDLER_TIMEOUT", def: "10s", help: "deadline of one call of a tool of svc/tools, and of one execution of a durable run (a Go duration, 1s to 10m)",
			bind: func(c *Config, v string) error {
				d, err := ParseHandlerTimeout(v)
				c.HandlerTimeout = d
				return err
			}},
		{flag: "park-after", roles: runtimes, kind: "duration", env: "SVC_PARK_AFTER", def: "100ms", help: "how long a streamed chat turn runs before it is parked off the HTTP server's connection, to hold less memory while it waits for its model (a Go duration, 0s to 1m; off never parks)",
			bind: func(c *Config, v string) error {
				d, err := ParseParkAfter(v)
				c.ParkAfter = d
				return err
			}},
		{flag: "handler-memory-mb", roles: runtimes, kind: "int", env: "SVC_HANDLER_MEMORY_MB", def: strconv.Itoa(sandbox.DefaultMemoryMB), help: "MiB one call of a tool of svc/tools may take in its sandbox worker before it is stopped (16 to 4096)",
			bind: bounded(MinHandlerMemoryMB, MaxHandlerMemoryMB, func(c *Config) *int { return &c.HandlerMemoryMB })},
		{flag: "handler-procs", roles: runtimes, kind: "int", env: "SVC_HANDLER_PROCS", def: strconv.Itoa(sandbox.DefaultMaxProcs), help: "sandbox worker processes that run calls of tools of svc/tools at once, per process (1 to 256); one agent holds at most half of them",
			bind: bounded(1, 256, func(c *Config) *int { return &c.HandlerProcs })},
	}
}

// apiURL binds an absolute http(s) URL, kept without a trailing slash.
func apiURL(field func(c *Config) *string) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		v = strings.TrimRight(v, "/")
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("want an absolute http or https URL")
		}
		*field(c) = v
		return nil
	}
}

// Bounds of SVC_HANDLER_MEMORY_MB.
const (
	MinHandlerMemoryMB = 16
	MaxHandlerMemoryMB = 4096
)

// newSandbox is the process's handler sandbox.
// reg, when not nil, gets its metrics.
func newSandbox(memoryMB, procs int, log *slog.Logger, reg prometheus.Registerer) (*sandbox.Pool, error) {
	// The argument only names the workers in ps: main serves them before it reads arguments.
	pool, err := sandbox.New(sandbox.Config{MemoryMB: memoryMB, MaxProcs: procs, Logger: log, Args: []string{"handler-sandbox"}})
	if err != nil {
		return nil, fmt.Errorf("handler sandbox: %w", err)
	}
	if reg != nil {
		stat := func(f func(sandbox.Stats) float64) func() float64 { return func() float64 { return f(pool.Stats()) } }
		if err := errors.Join(
			reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_handler_sandbox_workers", Help: "Handler sandbox worker processes alive (idle or running a call)."},
				stat(func(s sandbox.Stats) float64 { return float64(s.Procs) }))),
			reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "svc_handler_sandbox_kills_total", Help: "Handler sandbox workers killed because their call went over SVC_HANDLER_MEMORY_MB (reason memory) or did not stop at its deadline (reason deadline).",
				ConstLabels: prometheus.Labels{"reason": "memory"}}, stat(func(s sandbox.Stats) float64 { return float64(s.KilledMemory) }))),
			reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "svc_handler_sandbox_kills_total", Help: "Handler sandbox workers killed because their call went over SVC_HANDLER_MEMORY_MB (reason memory) or did not stop at its deadline (reason deadline).",
				ConstLabels: prometheus.Labels{"reason": "deadline"}}, stat(func(s sandbox.Stats) float64 { return float64(s.KilledOverran) }))),
		); err != nil {
			_ = pool.Close()
			return nil, err
		}
	}
	return pool, nil
}

// ParseHandlerTimeout reads SVC_HANDLER_TIMEOUT: a Go duration from 1s to 10m.
func ParseHandlerTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && (d < time.Second || d > 10*time.Minute) {
		err = errors.New("must be from 1s to 10m")
	}
	return d, err
}

// ParseParkAfter reads SVC_PARK_AFTER: a Go duration from 0s to 1m, or off, as a
// runtime.Options.ParkAfter (off is negative; 0s parks a stream at once, 1ns).
func ParseParkAfter(v string) (time.Duration, error) {
	if v == "off" {
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && (d < 0 || d > time.Minute) {
		err = errors.New("must be from 0s to 1m, or off")
	}
	if d == 0 {
		d = time.Nanosecond // Options' 0 is the default
	}
	return d, err
}

// ParseApprovalTimeout reads SVC_APPROVAL_TIMEOUT: a Go duration from 1s to 168h.
func ParseApprovalTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && (d < time.Second || d > 168*time.Hour) {
		err = errors.New("must be from 1s to 168h")
	}
	return d, err
}

// bounded binds a whole number from lo to hi.
func bounded(lo, hi int, dst func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err == nil && (n < lo || n > hi) {
			err = fmt.Errorf("must be a whole number from %d to %d", lo, hi)
		}
		*dst(c) = n
		return err
	}
}

// mebibytes binds a setting of whole MiB, at least 1 and at most 1 TiB.
func mebibytes(dst func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && (n < 1 || n > 1<<20) {
			err = errors.New("must be a whole number of MiB from 1 to 1048576")
		}
		*dst(c) = n
		return err
	}
}

// addFlags declares the settings of r on fs, typed as their kind, with the environment
// variable's value as the default.
func addFlags(fs *pflag.FlagSet, r role) {
	for _, s := range settings() {
		if s.roles&r == 0 {
			continue
		}
		def := s.def
		if v, ok := os.LookupEnv(s.env); ok {
			def = v
		}
		f := fs.VarPF(&settingValue{v: def, kind: s.kind}, s.flag, "", fmt.Sprintf("%s (env %s)", s.help, s.env))
		if s.kind == "bool" {
			f.NoOptDefVal = "true" // --s3-use-ssl alone means true
		}
		if s.secret && def != "" {
			f.DefValue = "(set)"
		}
	}
}

// settingValue is a setting's flag: it keeps the text, checked by the setting's bind in
// loadConfig (so that a bad value names the setting), and shows its kind in --help.
type settingValue struct{ v, kind string }

func (s *settingValue) String() string { return s.v }

// Set implements pflag.Value.
func (s *settingValue) Set(v string) error { s.v = v; return nil }

// Type implements pflag.Value: the kind --help shows.
func (s *settingValue) Type() string {
	if s.kind == "" {
		return "string"
	}
	return s.kind
}

// loadConfig reads every setting from fs (the default for one fs does not declare), naming the
// setting of a bad value.
func loadConfig(fs *pflag.FlagSet) (Config, error) {
	var c Config
	for _, s := range settings() {
		v := s.def // a setting the command does not read
		if f := fs.Lookup(s.flag); f != nil {
			v = f.Value.String()
		}
		if err := s.bind(&c, strings.TrimSpace(v)); err != nil {
			if s.secret {
				return Config{}, fmt.Errorf("setting %s (--%s): %w", s.env, s.flag, err) // never the value
			}
			return Config{}, fmt.Errorf("setting %s (--%s) = %q: %w", s.env, s.flag, v, err)
		}
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return Config{}, fmt.Errorf("setting SVC_ADDR (--addr) = %q: %w", c.Addr, err)
	}
	if c.AppsDomain == "" || strings.ContainsAny(c.AppsDomain, "/: ") {
		return Config{}, fmt.Errorf("setting SVC_APPS_DOMAIN (--apps-domain) = %q: want a domain name", c.AppsDomain)
	}
	c.AppsDomain = strings.ToLower(strings.Trim(c.AppsDomain, "."))
	if c.DatabaseURL != "" && migrations.DialectOfURL(c.DatabaseURL) != migrations.Postgres {
		return Config{}, errors.New("setting DATABASE_URL: want a postgres:// URL (leave it empty for the embedded SQLite database)")
	}
	if c.RedisURL != "" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
		return Config{}, errors.New("setting REDIS_URL: want a redis:// URL")
	}
	if c.DefaultModel != "" && !strings.Contains(c.DefaultModel, "/") {
		return Config{}, fmt.Errorf("setting SVC_DEFAULT_MODEL = %q: want provider/model, e.g. openai/gpt-4.1-mini", c.DefaultModel)
	}
	switch c.LogFormat {
	case "", "json", "text":
	default:
		return Config{}, fmt.Errorf("setting SVC_LOG_FORMAT = %q: want json or text", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return Config{}, fmt.Errorf("setting SVC_LOG_LEVEL = %q: want debug, info, warn or error", c.LogLevel)
	}
	return c, nil
}

// key returns the bytes of a configured key (hex or base64), or the one kept in the data dir
// under name, generated on first use with mode 0600.
func (c Config) key(configured, setting, name string, size int) ([]byte, error) {
	if configured != "" {
		if b, err := hex.DecodeString(configured); err == nil && len(b) >= size {
			return b, nil
		}
		if b, err := base64.StdEncoding.DecodeString(configured); err == nil && len(b) >= size {
			return b, nil
		}
		return nil, fmt.Errorf("setting %s: want hex or base64 of at least %d bytes", setting, size)
	}
	path := filepath.Join(c.DataDir, name)
	if b, err := os.ReadFile(path); err == nil {
		k, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) < size {
			return nil, fmt.Errorf("key file %s is damaged: want hex of at least %d bytes (or set %s)", path, size, setting)
		}
		return k, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	k := make([]byte, size)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return c.key(configured, setting, name, size) // another process made it first
	}
	if err != nil {
		return nil, fmt.Errorf("create key file: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
		_ = f.Close() // the write error is the one worth reporting
		return nil, fmt.Errorf("write key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write key file: %w", err)
	}
	return k, nil
}
