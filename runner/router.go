package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"svc/agent"
	"svc/errcode"
	"svc/registry"
	"svc/runner/runtime"
	"svc/runner/stores"
)

// Runtime serves one deployment. Close stops its background work and waits for it.
type Runtime interface {
	http.Handler
	Close(ctx context.Context) error
}

// BundleLoader reads a deployment's bundle into its agent.
type BundleLoader func(ctx context.Context, d registry.Deployment) (*agent.Agent, error)

// RuntimeFactory builds the runtime of a deployment from its loaded agent.
type RuntimeFactory func(ctx context.Context, a *agent.Agent, d registry.Deployment) (Runtime, error)

// RuntimeReporter records why a deployment's bundle could not be loaded, where the platform API
// reads it (the deployment record); message "" says a load succeeded again.
type RuntimeReporter interface {
	SetRuntimeError(ctx context.Context, deployID, message string) error
}

// Resolver finds the deployment a host name serves (registry.Deployments implements it): with
// deployID that deployment of the agent with slug, without it the agent's active production one.
// It answers registry.ErrAgentNotFound, registry.ErrDeploymentNotFound or registry.ErrNoActive
// when there is none.
type Resolver interface {
	ForHost(ctx context.Context, slug, deployID string) (registry.Deployment, error)
}

// Watcher is a Resolver that tells of its changes: Watch calls fn after every change it commits,
// until cancel (registry.Deployments implements it). The router drops the answers it keeps at
// each call, so a change made through it is seen by the very next request.
type Watcher interface {
	Watch(fn func()) (cancel func())
}

// Config holds the Router's dependencies. Zero sizes take the documented defaults.
type Config struct {
	Resolver Resolver
	// Lookup finds a deployment by id, for Deployment; nil makes Deployment fail.
	Lookup     func(ctx context.Context, id string) (registry.Deployment, error)
	AppsDomain string // e.g. apps.localhost
	LoadBundle BundleLoader
	NewRuntime RuntimeFactory
	// Reporter, when set, is told of every failed load and of the first success after one.
	Reporter    RuntimeReporter
	BundleCache int // parsed bundles kept, by digest (default 64)
	Runtimes    int // runtimes kept, by deployment (default 256)
	// Hosts is how many hosts' deployments are kept in memory (default 1024); only found
	// deployments are kept, so unknown hosts cannot grow it past the deployments that exist,
	// and it is bounded all the same.
	Hosts int
	// HostTTL is how long a host's deployment is answered from memory before it is read again
	// (default 1s). It bounds how late this router sees a change committed by another process
	// (an API or worker beside this runner); a change committed through the Resolver itself,
	// when it is a Watcher (svc up, a worker's own builds), is seen by the next request.
	HostTTL time.Duration
	// Changes, when set, reads a counter of deployment changes shared by every process (svc
	// api, workers and runners on one Redis), raised by each change before the call that made
	// it returns: a kept host answers only while the counter reads as it did when the host was
	// read, so no request made after a change's call returned reaches the deployment it
	// replaced. One read per request, far cheaper than the Resolver's; a failed read reads the
	// Resolver.
	Changes func(ctx context.Context) (uint64, error)
	// RetryAfter is how long a failed load is answered from memory before the bundle is read
	// again (default 5s): a broken bundle costs one object-store read per interval, not one per
	// request.
	RetryAfter time.Duration
	Now        func() time.Time // the clock RetryAfter counts on (default time.Now)
	Logger     *slog.Logger
}

// Router dispatches agent hosts to deployment runtimes. It is safe for concurrent use.
type Router struct {
	cfg      Config
	bundles  *lru.Cache[string, *agent.Agent]
	runtimes *lru.Cache[string, Runtime]
	mu       sync.Mutex             // serialises loading, so one deployment is loaded once
	failed   map[string]loadFailure // deployment → its last failed load, under mu
	wg       sync.WaitGroup

	// hosts keeps ForHost's found answers. An entry serves while it is younger than HostTTL and
	// of the current generation; every change the Resolver tells of starts a new generation, and
	// a read begun under an older one is never kept.
	hosts      *lru.Cache[Target, hostEntry]
	generation atomic.Uint64
	lookups    singleflight.Group // one ForHost at a time per host and generation
	unwatch    func()
}

// hostEntry is a host's deployment as read at a time, in a generation.
type hostEntry struct {
	d          registry.Deployment
	at         time.Time
	generation uint64
	changes    uint64 // Config.Changes when read
}

// loadFailure is a failed load, answered from memory until retry.
type loadFailure struct {
	err   error
	retry time.Time
}

// NewRouter returns a router; Close releases its runtimes.
func NewRouter(cfg Config) (*Router, error) {
	if cfg.Resolver == nil || cfg.LoadBundle == nil || cfg.NewRuntime == nil || cfg.AppsDomain == "" {
		return nil, errors.New("runner: router needs Resolver, AppsDomain, LoadBundle and NewRuntime")
	}
	if cfg.BundleCache <= 0 {
		cfg.BundleCache = 64
	}
	if cfg.Runtimes <= 0 {
		cfg.Runtimes = 256
	}
	if cfg.Hosts <= 0 {
		cfg.Hosts = 1024
	}
	if cfg.HostTTL <= 0 {
		cfg.HostTTL = time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Router{cfg: cfg, failed: map[string]loadFailure{}}
	var err error
	if r.bundles, err = lru.New[string, *agent.Agent](cfg.BundleCache); err != nil {
		return nil, fmt.Errorf("runner: bundle cache: %w", err)
	}
	r.runtimes, err = lru.NewWithEvict[string, Runtime](cfg.Runtimes, func(_ string, rt Runtime) {
		r.wg.Go(func() { r.closeRuntime(rt) })
	})
	if err != nil {
		return nil, fmt.Errorf("runner: runtime cache: %w", err)
	}
	if r.hosts, err = lru.New[Target, hostEntry](cfg.Hosts); err != nil {
		return nil, fmt.Errorf("runner: host cache: %w", err)
	}
	r.unwatch = func() {}
	if w, ok := cfg.Resolver.(Watcher); ok {
		r.unwatch = w.Watch(r.ForgetHosts)
	}
	return r, nil
}

// ForgetHosts drops every host's kept deployment: the next request to each reads it again.
func (r *Router) ForgetHosts() {
	r.generation.Add(1)
	r.hosts.Purge()
}

// forHost is the deployment host t names: from memory when read lately in this generation, else
// from the Resolver, read once for all the requests that ask at the same time.
func (r *Router) forHost(ctx context.Context, t Target) (registry.Deployment, error) {
	gen := r.generation.Load()
	var changes uint64
	keep := true // false when the shared change counter could not be read
	if r.cfg.Changes != nil {
		var err error
		if changes, err = r.cfg.Changes(ctx); err != nil {
			keep = false
			r.cfg.Logger.WarnContext(ctx, "read the deployment change counter", "err", err)
		}
	}
	if e, ok := r.hosts.Get(t); keep && ok && e.generation == gen && e.changes == changes && r.cfg.Now().Sub(e.at) < r.cfg.HostTTL {
		return e.d, nil
	}
	key := strconv.FormatUint(gen, 10) + "/" + strconv.FormatUint(changes, 10) + "/" + strconv.FormatBool(keep) + "/" + t.DeployID + "/" + t.Slug
	v, err, _ := r.lookups.Do(key, func() (any, error) {
		// The requests that share this read must not fail because the first one went away;
		// its age counts from before the read.
		at := r.cfg.Now()
		d, err := r.cfg.Resolver.ForHost(context.WithoutCancel(ctx), t.Slug, t.DeployID)
		if err == nil && keep {
			r.hosts.Add(t, hostEntry{d: d, at: at, generation: gen, changes: changes})
		}
		return d, err
	})
	d, _ := v.(registry.Deployment)
	return d, err
}

func (r *Router) closeRuntime(rt Runtime) {
	if err := rt.Close(context.Background()); err != nil {
		r.cfg.Logger.Warn("close runtime", "err", err)
	}
}

// Close closes every cached runtime and waits for them.
func (r *Router) Close() {
	r.unwatch()
	r.runtimes.Purge() // calls the eviction callback for each
	r.wg.Wait()
}

// Target is what a Host name names.
type Target struct {
	Slug     string
	DeployID string // "" for the persistent name
}

// ParseHost tells whether host (port ignored) is an agent name under domain, and which.
func ParseHost(host, domain string) (Target, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return Target{}, false
	}
	if id, slug, ok := strings.Cut(label, "--"); ok {
		if id == "" || slug == "" {
			return Target{}, false
		}
		return Target{Slug: slug, DeployID: id}, true
	}
	return Target{Slug: label}, true
}

// Match reports whether the request is for an agent host.
func (r *Router) Match(req *http.Request) bool {
	_, ok := ParseHost(req.Host, r.cfg.AppsDomain)
	return ok
}

// ServeHTTP serves an agent host; a non-agent host answers 404.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	t, ok := ParseHost(req.Host, r.cfg.AppsDomain)
	if !ok {
		errcode.Write(w, errcode.NotFound, "no agent is served at this host")
		return
	}
	if runtime.CrossOrigin(w, req) { // a preflight needs no deployment; errors below reach the page
		return
	}
	d, err := r.forHost(req.Context(), t)
	switch {
	case errors.Is(err, registry.ErrAgentNotFound), errors.Is(err, registry.ErrDeploymentNotFound):
		errcode.Write(w, errcode.NotFound, "no agent or deployment is served at this host")
		return
	case errors.Is(err, registry.ErrNoActive):
		errcode.Write(w, errcode.NoActiveDeployment, "")
		return
	case err != nil:
		r.cfg.Logger.ErrorContext(req.Context(), "resolve host", "host", req.Host, "err", err)
		errcode.Write(w, errcode.Internal, "")
		return
	}
	if d.RuntimeStopped {
		errcode.Write(w, errcode.RuntimeStopped, "")
		return
	}
	if d.Status != registry.StatusReady || d.BundleKey == "" {
		errcode.Write(w, errcode.DeploymentNotReady, "the deployment is "+d.Status)
		return
	}
	rt, err := r.runtime(req.Context(), d)
	if err != nil {
		errcode.Write(w, errcode.RuntimeUnavailable, fmt.Sprintf("the runtime of deployment %s could not start: %s; it is tried again every %s",
			d.ID, publicReason(err), r.cfg.RetryAfter))
		return
	}
	rt.ServeHTTP(w, req)
}

// publicReason is why a runtime could not start, as the router tells anyone who calls the
// agent's URL, before any credential is checked: the error itself when it is about the agent
// (its source does not load, its svc.json stores entry is wrong), whose text names files and
// fields of the agent and never a value or an address; otherwise only that the platform failed,
// since such errors may name the platform's hosts, buckets and keys (the deployment's
// runtimeError, in `svc status`, has the full text for its operators).
func publicReason(err error) string {
	var problems agent.Problems
	if errors.As(err, &problems) || errors.Is(err, stores.ErrConfig) {
		return strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	return "the platform could not load its bundle (an error of the platform, not of the agent: `svc status` shows it to the platform's operators)"
}

// Deployment returns the runtime of deployment id, loading its bundle on first use (a durable
// run resumes on the deployment that started it, whatever serves the agent's URL now).
func (r *Router) Deployment(ctx context.Context, id string) (Runtime, error) {
	if rt, ok := r.runtimes.Get(id); ok {
		return rt, nil
	}
	if r.cfg.Lookup == nil {
		return nil, errors.New("router: no deployment lookup")
	}
	d, err := r.cfg.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.Status != registry.StatusReady || d.BundleKey == "" {
		return nil, fmt.Errorf("deployment %s is %s, not ready", id, d.Status)
	}
	return r.runtime(ctx, d)
}

// runtime returns the deployment's runtime, loading its bundle on first use.
func (r *Router) runtime(ctx context.Context, d registry.Deployment) (Runtime, error) {
	if rt, ok := r.runtimes.Get(d.ID); ok {
		return rt, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt, ok := r.runtimes.Get(d.ID); ok {
		return rt, nil
	}
	if f, ok := r.failed[d.ID]; ok && r.cfg.Now().Before(f.retry) {
		return nil, f.err
	}
	rt, err := r.load(ctx, d)
	if err != nil {
		r.cfg.Logger.ErrorContext(ctx, "load runtime", "deploy_id", d.ID, "err", err)
		r.failed[d.ID] = loadFailure{err: err, retry: r.cfg.Now().Add(r.cfg.RetryAfter)}
		r.report(ctx, d.ID, err.Error())
		return nil, err
	}
	delete(r.failed, d.ID)
	if d.RuntimeError != "" {
		r.report(ctx, d.ID, "")
	}
	r.runtimes.Add(d.ID, rt)
	return rt, nil
}

// load reads the deployment's bundle (or takes it from the cache) and builds its runtime.
func (r *Router) load(ctx context.Context, d registry.Deployment) (Runtime, error) {
	key := d.Digest
	if key == "" {
		key = d.BundleKey
	}
	a, ok := r.bundles.Get(key)
	if !ok {
		var err error
		if a, err = r.cfg.LoadBundle(ctx, d); err != nil {
			return nil, err
		}
		r.bundles.Add(key, a)
	}
	return r.cfg.NewRuntime(ctx, a, d)
}

// report records a load's outcome through the Reporter; a failure to record is logged only.
func (r *Router) report(ctx context.Context, deployID, message string) {
	if r.cfg.Reporter == nil {
		return
	}
	if err := r.cfg.Reporter.SetRuntimeError(context.WithoutCancel(ctx), deployID, message); err != nil {
		r.cfg.Logger.WarnContext(ctx, "record runtime state", "deploy_id", deployID, "err", err)
	}
}

// Forget drops a deployment's runtime (after a runtime stop), closing it.
func (r *Router) Forget(deployID string) { r.runtimes.Remove(deployID) }
