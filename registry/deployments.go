package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Deployment status values (CONTRACT §3). A deployment serves when Status is StatusReady and IsActive.
const (
	StatusQueued    = "queued"
	StatusBuilding  = "building"
	StatusReady     = "ready"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Build status values (CONTRACT §3).
const (
	BuildQueued    = "queued"
	BuildRunning   = "running"
	BuildSucceeded = "succeeded"
	BuildFailed    = "failed"
	BuildCancelled = "cancelled"
)

// Production is the default environment.
const Production = "production"

// Errors of the deployment state machine.
var (
	ErrDeploymentNotFound = errors.New("registry: deployment not found")
	ErrBuildNotFound      = errors.New("registry: build not found")
	ErrBuildNotReady      = errors.New("registry: deployment is not ready")
	ErrNothingToRollBack  = errors.New("registry: no earlier deployment qualifies for rollback")
	ErrEvalGateBlocked    = errors.New("registry: evals status blocks promotion")
	ErrBundleUnavailable  = errors.New("registry: source bundle is missing or cannot be copied")
	ErrNoActive           = errors.New("registry: environment has no active deployment")
	ErrBuildFinished      = errors.New("registry: build already finished")
)

// Deployment is one build's deployment in an environment.
type Deployment struct {
	ID              string `gorm:"primaryKey"`
	AgentID         string
	BuildID         string
	Environment     string
	Branch          string
	CommitSHA       string
	SourceVersionID string
	Status          string
	IsActive        bool
	BundleKey       string
	Digest          string
	PromotedFrom    string
	RuntimeStopped  bool
	// RuntimeError is why a runner last failed to load the bundle ("" once one loads it).
	RuntimeError   string
	RuntimeErrorAt *time.Time
	Error          string
	CreatedAt      time.Time
	ReadyAt        *time.Time
	ActivatedAt    *time.Time
}

// TableName names the table of Deployment.
func (Deployment) TableName() string { return "deployments" }

// Serving reports whether the deployment is the ready, active one of its environment.
func (d Deployment) Serving() bool { return d.Status == StatusReady && d.IsActive }

// Deployments is the deployment state machine over the database. Every transition is one
// transaction under a per-(agent, environment) lock, so at every instant at most one deployment
// of an environment is active (the partial unique index enforces it too). Safe for concurrent use,
// across processes.
type Deployments struct {
	db  *gorm.DB
	now func() time.Time

	watchMu  sync.Mutex
	watchers map[*func()]struct{} // called after every committed change of a deployment
}

// Watch calls fn after every change of a deployment that this Deployments commits (activate,
// promote, rollback, a build's run and end, runtime stop and start, a runtime error recorded),
// once the transaction is committed, until cancel is called: what caches deployments in this
// process (the runner's router) drops them then. Changes committed by other processes are not
// seen. fn runs before the changing method returns: it must return quickly.
func (s *Deployments) Watch(fn func()) (cancel func()) {
	key := &fn
	s.watchMu.Lock()
	if s.watchers == nil {
		s.watchers = map[*func()]struct{}{}
	}
	s.watchers[key] = struct{}{}
	s.watchMu.Unlock()
	return func() {
		s.watchMu.Lock()
		delete(s.watchers, key)
		s.watchMu.Unlock()
	}
}

// changed tells the watchers that a deployment may have changed; callers defer it, so it runs
// after their transaction has committed (or rolled back: a spurious call only costs a re-read).
func (s *Deployments) changed() {
	s.watchMu.Lock()
	fns := make([]func(), 0, len(s.watchers))
	for fn := range s.watchers {
		fns = append(fns, *fn)
	}
	s.watchMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// NewDeployments returns the state machine over db.
func NewDeployments(db *gorm.DB) *Deployments {
	return &Deployments{db: db, now: func() time.Time { return time.Now().UTC() }}
}

// Get returns a deployment by id.
func (s *Deployments) Get(ctx context.Context, id string) (Deployment, error) {
	var d Deployment
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Deployment{}, ErrDeploymentNotFound
	}
	if err != nil {
		return Deployment{}, fmt.Errorf("get deployment: %w", err)
	}
	return d, nil
}

// DeploymentQuery selects a page of an agent's deployments (Deployments.Page).
type DeploymentQuery struct {
	Environment string // "": every environment
	Active      bool   // only the active deployments (one per environment at most)
	Limit       int    // 1..500; 100 when 0 or less
	Before      Cursor // the zero Cursor: the first page
}

// Page returns a page of an agent's deployments that q selects, newest (by creation, then by
// id) first, and the cursor of the next page: the zero Cursor when this page is the last. A
// q.Before of another list or agent is ErrBadCursor.
func (s *Deployments) Page(ctx context.Context, agentID string, q DeploymentQuery) ([]Deployment, Cursor, error) {
	tx := s.db.WithContext(ctx).Where("agent_id = ?", agentID)
	if q.Environment != "" {
		tx = tx.Where("environment = ?", q.Environment)
	}
	if q.Active {
		tx = tx.Where("is_active = ?", true)
	}
	tx, err := wherePage(tx, CursorDeployments, agentID, "created_at", q.Before, q.Limit)
	if err != nil {
		return nil, Cursor{}, err
	}
	var ds []Deployment
	if err := tx.Find(&ds).Error; err != nil {
		return nil, Cursor{}, fmt.Errorf("list deployments: %w", err)
	}
	ds, next := nextCursor(ds, CursorDeployments, agentID, q.Limit, func(d *Deployment) (time.Time, string) { return d.CreatedAt, d.ID })
	return ds, next, nil
}

// Active returns the active deployment of an environment, or ErrNoActive.
func (s *Deployments) Active(ctx context.Context, agentID, env string) (Deployment, error) {
	var d Deployment
	err := s.db.WithContext(ctx).Where("agent_id = ? AND environment = ? AND is_active = ?", agentID, env, true).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Deployment{}, ErrNoActive
	}
	if err != nil {
		return Deployment{}, fmt.Errorf("active deployment: %w", err)
	}
	return d, nil
}

// ForHost returns the deployment an agent host name serves: with deployID, that deployment of
// the agent with slug; without, the agent's active production deployment (one indexed query).
// A missing agent is ErrAgentNotFound, a missing deployment ErrDeploymentNotFound, and an agent
// with no active production deployment ErrNoActive.
func (s *Deployments) ForHost(ctx context.Context, slug, deployID string) (Deployment, error) {
	var d Deployment
	q := s.db.WithContext(ctx).Table("deployments").Select("deployments.*").
		Joins("JOIN agents ON agents.id = deployments.agent_id").Where("agents.slug = ?", slug)
	if deployID != "" {
		err := q.Where("deployments.id = ?", deployID).Take(&d).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return d, ErrDeploymentNotFound
		}
		if err != nil {
			return d, fmt.Errorf("find deployment for host: %w", err)
		}
		return d, nil
	}
	err := q.Where("deployments.environment = ? AND deployments.is_active = ?", Production, true).Take(&d).Error
	if err == nil {
		return d, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return d, fmt.Errorf("find active deployment for host: %w", err)
	}
	var n int64
	if err := s.db.WithContext(ctx).Table("agents").Where("slug = ?", slug).Count(&n).Error; err != nil {
		return d, fmt.Errorf("find agent for host: %w", err)
	}
	if n == 0 {
		return d, ErrAgentNotFound
	}
	return d, ErrNoActive
}

// SetRuntimeError records why a runner could not load the deployment's bundle; message "" clears
// it (a runner loaded it). It writes only when the recorded message changes.
func (s *Deployments) SetRuntimeError(ctx context.Context, deployID, message string) error {
	defer s.changed()
	var at *time.Time
	if message != "" {
		now := s.now()
		at = &now
	}
	err := s.db.WithContext(ctx).Model(&Deployment{}).Where("id = ? AND runtime_error <> ?", deployID, message).
		Updates(map[string]any{"runtime_error": message, "runtime_error_at": at}).Error
	if err != nil {
		return fmt.Errorf("record runtime error: %w", err)
	}
	return nil
}

// SetRuntimeStopped records whether a deployment's runtime is stopped.
func (s *Deployments) SetRuntimeStopped(ctx context.Context, deployID string, stopped bool) (Deployment, error) {
	defer s.changed()
	res := s.db.WithContext(ctx).Model(&Deployment{}).Where("id = ?", deployID).Update("runtime_stopped", stopped)
	if res.Error != nil {
		return Deployment{}, fmt.Errorf("set runtime state: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return Deployment{}, ErrDeploymentNotFound
	}
	return s.Get(ctx, deployID)
}

// Queued returns the ids of builds still waiting to run, oldest first (at most 1000).
func (s *Deployments) Queued(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.db.WithContext(ctx).Model(&Build{}).Where("status = ?", BuildQueued).Order("created_at").Limit(1000).Pluck("id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("list queued builds: %w", err)
	}
	return ids, nil
}
