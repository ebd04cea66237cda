package runtime

import (
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"svc/agent"
	"svc/runner/durable/engine"
	"svc/runner/sandbox"
	"svc/runner/sessions/memstore"
)

// DevOptions configure NewDev. Zero values are documented defaults.
type DevOptions struct {
	// Dir is the agent source folder; "" means ".".
	Dir string
	// AuthToken protects the routes when set (AUTH_TOKEN).
	AuthToken string
	// DefaultModel applies when svc.json has no models.main (SVC_DEFAULT_MODEL); zero means echo.
	DefaultModel agent.ModelRef
	// Env resolves env: references and provider variables; nil means os.LookupEnv.
	Env func(name string) (string, bool)
	// MaxTurns and IdleTimeout are as in Options.
	MaxTurns    int
	IdleTimeout time.Duration
	// ApprovalTimeout and AllowMetadataAddresses are as in Options (SVC_APPROVAL_TIMEOUT,
	// SVC_ALLOW_METADATA_ADDRESSES).
	ApprovalTimeout        time.Duration
	AllowMetadataAddresses bool
	// HandlerTimeout and Sandbox are as in Options (SVC_HANDLER_TIMEOUT; SVC_HANDLER_MEMORY_MB
	// and SVC_HANDLER_PROCS configure the sandbox).
	HandlerTimeout time.Duration
	// ParkAfter is as in Options (SVC_PARK_AFTER).
	ParkAfter time.Duration
	Sandbox   *sandbox.Pool
	// Tracer is as in Options.
	Tracer trace.Tracer
	// Durable is as in Options: svc dev builds one in memory, with timers for its wake-ups.
	Durable *engine.Engine
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
}

// NewDev is the runtime of `svc dev`: one agent loaded from a folder, sessions and attachments
// in memory. An invalid agent tree is an error listing every problem (agent.Problems). The
// caller serves it (the same server lifecycle as every role) and closes it.
func NewDev(o DevOptions) (*Runtime, *agent.Agent, error) {
	dir := o.Dir
	if dir == "" {
		dir = "."
	}
	ag, err := agent.LoadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	env := o.Env
	if env == nil {
		env = os.LookupEnv
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	rt, err := New(Options{
		Agent: ag, Version: ag.Config.Version, DeployID: "dev", Sessions: memstore.New(),
		AuthToken: o.AuthToken, Models: NewModels(env, nil), DefaultModel: o.DefaultModel, Env: env,
		MaxTurns: o.MaxTurns, IdleTimeout: o.IdleTimeout, ApprovalTimeout: o.ApprovalTimeout, HandlerTimeout: o.HandlerTimeout, ParkAfter: o.ParkAfter, Sandbox: o.Sandbox, Durable: o.Durable,
		AllowMetadataAddresses: o.AllowMetadataAddresses, Tracer: o.Tracer, Logger: log,
		SecretHint: func(name string) string { return "set " + name + " in the environment of svc dev" },
	})
	if err != nil {
		return nil, nil, err
	}
	return rt, ag, nil
}
