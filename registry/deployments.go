package registry

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations"
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

// Build is one run of the builder for a deployment.
type Build struct {
	ID              string `gorm:"primaryKey"`
	AgentID         string
	DeployID        string
	Environment     string
	Branch          string
	CommitSHA       string
	SourceVersionID string
	Trigger         string
	Status          string
	Error           string
	Steps           string // JSON array of steps
	Attempts        int
	CreatedAt       time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
}

// TableName names the table of Build.
func (Build) TableName() string { return "builds" }

// Activation records one change of the active deployment of an environment.
type Activation struct {
	ID           int64 `gorm:"primaryKey"`
	AgentID      string
	Environment  string
	Action       string // activate | promote | rollback | build
	FromDeployID string
	ToDeployID   string
	Actor        string
	CreatedAt    time.Time
}

// TableName names the table of Activation.
func (Activation) TableName() string { return "activations" }

// Deployments is the deployment state machine over the database. Every transition is one
// transaction under a per-(agent, environment) lock, so at every instant at most one deployment
// of an environment is active (the partial unique index enforces it too). Safe for concurrent use,
// across processes.
type Deployments struct {
	db  *gorm.DB
	now func() time.Time
}

// NewDeployments returns the state machine over db.
func NewDeployments(db *gorm.DB) *Deployments {
	return &Deployments{db: db, now: func() time.Time { return time.Now().UTC() }}
}

// lockEnv serialises transitions of one environment of one agent. On Postgres it takes a
// transaction-scoped advisory lock; SQLite transactions are immediate (one writer at a time).
func lockEnv(tx *gorm.DB, agentID, env string) error {
	if migrations.DialectOf(tx) != migrations.Postgres {
		return nil
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(agentID + "\x00" + env)) // hash.Hash.Write never fails
	if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", int64(h.Sum64())).Error; err != nil {
		return fmt.Errorf("lock environment: %w", err)
	}
	return nil
}

// BuildRequest asks for a build of one commit or source version into an environment.
type BuildRequest struct {
	AgentID         string
	Environment     string
	Branch          string
	Commit          string
	SourceVersionID string
	Trigger         string // push | redeploy
	// Reuse asks for the newest non-failed build of the same commit (or source version) in the
	// environment, or one being built, instead of a new build (pushes and reuseBuild redeploys).
	Reuse bool
}

// BuildStart is the outcome of StartBuild.
type BuildStart struct {
	Build      Build
	Deployment Deployment
	// Reused is true when an existing build was returned and nothing new was started.
	Reused bool
	// Building is true when the reused build is still queued or running.
	Building bool
}

// StartBuild creates a queued build and its deployment, or with Reuse returns the existing one
// per spec 3.1: the environment's newest build is the same commit and has not failed, or a build
// of that commit is in flight. Two identical requests at the same instant start one build.
func (s *Deployments) StartBuild(ctx context.Context, req BuildRequest) (BuildStart, error) {
	if req.Environment == "" {
		req.Environment = Production
	}
	var out BuildStart
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lockEnv(tx, req.AgentID, req.Environment); err != nil {
			return err
		}
		if req.Reuse {
			b, ok, err := reusable(tx, req)
			if err != nil {
				return err
			}
			if ok {
				var d Deployment
				if err := tx.Where("id = ?", b.DeployID).Take(&d).Error; err != nil {
					return fmt.Errorf("load deployment of build %s: %w", b.ID, err)
				}
				out = BuildStart{Build: b, Deployment: d, Reused: true, Building: b.Status == BuildQueued || b.Status == BuildRunning}
				return nil
			}
		}
		now, err := s.creationTime(tx, req.AgentID, req.Environment)
		if err != nil {
			return err
		}
		b := Build{
			ID: auth.NewID("b"), AgentID: req.AgentID, DeployID: auth.NewID("d"), Environment: req.Environment,
			Branch: req.Branch, CommitSHA: req.Commit, SourceVersionID: req.SourceVersionID, Trigger: req.Trigger,
			Status: BuildQueued, Steps: "[]", CreatedAt: now,
		}
		d := Deployment{
			ID: b.DeployID, AgentID: req.AgentID, BuildID: b.ID, Environment: req.Environment, Branch: req.Branch,
			CommitSHA: req.Commit, SourceVersionID: req.SourceVersionID, Status: StatusQueued, CreatedAt: now,
		}
		if err := tx.Create(&b).Error; err != nil {
			return fmt.Errorf("create build: %w", err)
		}
		if err := tx.Create(&d).Error; err != nil {
			return fmt.Errorf("create deployment: %w", err)
		}
		out = BuildStart{Build: b, Deployment: d}
		return nil
	})
	return out, err
}

func reusable(tx *gorm.DB, req BuildRequest) (Build, bool, error) {
	same := func(q *gorm.DB) *gorm.DB {
		if req.Commit != "" {
			return q.Where("commit_sha = ?", req.Commit)
		}
		return q.Where("commit_sha = '' AND source_version_id = ?", req.SourceVersionID)
	}
	// A build of that commit in flight.
	var inflight Build
	err := same(tx.Where("agent_id = ? AND environment = ? AND status IN ?", req.AgentID, req.Environment, []string{BuildQueued, BuildRunning})).
		Order("created_at DESC").Take(&inflight).Error
	if err == nil {
		return inflight, true, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return Build{}, false, fmt.Errorf("find build in flight: %w", err)
	}
	// The environment's newest build, when it is that commit and did not fail.
	var newest Build
	err = tx.Where("agent_id = ? AND environment = ?", req.AgentID, req.Environment).Order("created_at DESC, id DESC").Take(&newest).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Build{}, false, nil
	}
	if err != nil {
		return Build{}, false, fmt.Errorf("find newest build: %w", err)
	}
	matches := newest.CommitSHA == req.Commit && (req.Commit != "" || newest.SourceVersionID == req.SourceVersionID)
	if matches && newest.Status != BuildFailed && newest.Status != BuildCancelled {
		return newest, true, nil
	}
	return Build{}, false, nil
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

// GetBuild returns a build by id.
func (s *Deployments) GetBuild(ctx context.Context, id string) (Build, error) {
	var b Build
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&b).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Build{}, ErrBuildNotFound
	}
	if err != nil {
		return Build{}, fmt.Errorf("get build: %w", err)
	}
	return b, nil
}

// List returns an agent's deployments, newest first, of one environment or ("") of all.
func (s *Deployments) List(ctx context.Context, agentID, env string, limit int) ([]Deployment, error) {
	q := s.db.WithContext(ctx).Where("agent_id = ?", agentID)
	if env != "" {
		q = q.Where("environment = ?", env)
	}
	if limit <= 0 || limit > 500 {
		limit = 500
	}
	var ds []Deployment
	if err := q.Order("created_at DESC, id DESC").Limit(limit).Find(&ds).Error; err != nil {
		return nil, fmt.Errorf("list deployments: %w", err)
	}
	return ds, nil
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

// BuildRunning marks a build running (again, after a crash: attempts counts the runs). A build
// that already finished is ErrBuildFinished, so a redelivered job does nothing.
func (s *Deployments) BuildRunning(ctx context.Context, buildID string) (Build, error) {
	var b Build
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ?", buildID).Take(&b).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return ErrBuildNotFound
			}
			return fmt.Errorf("load build: %w", err)
		}
		if b.Status != BuildQueued && b.Status != BuildRunning {
			return ErrBuildFinished
		}
		now := s.now()
		b.Status, b.Attempts, b.StartedAt = BuildRunning, b.Attempts+1, &now
		if err := tx.Model(&Build{}).Where("id = ?", b.ID).
			Updates(map[string]any{"status": BuildRunning, "attempts": b.Attempts, "started_at": now}).Error; err != nil {
			return fmt.Errorf("mark build running: %w", err)
		}
		if err := tx.Model(&Deployment{}).Where("id = ?", b.DeployID).Update("status", StatusBuilding).Error; err != nil {
			return fmt.Errorf("mark deployment building: %w", err)
		}
		return nil
	})
	return b, err
}

// BuildOutcome is what a finished build produced.
type BuildOutcome struct {
	Steps     string // JSON array of steps
	BundleKey string // "" when failed
	Digest    string
	Error     string // "" when succeeded
	// Activate makes the deployment active in its environment when the build succeeded, unless
	// a deployment of the environment requested later is in flight or ready (newest requested
	// wins): then it stays ready and inactive.
	Activate bool
	Actor    string
	// Done, when set and the build succeeded, gives the build log's last line (step "done"),
	// which FinishBuild writes in its transaction: d is the finished deployment, and newer, when
	// Activate was asked for but not done, the deployment requested later that held it back.
	Done func(d Deployment, newer *Deployment) string
}

// FinishBuild records a build's end and its deployment's state; with Activate (non-production
// environments, or production with autoPromoteProduction) the deployment becomes active in the
// same transaction, unless a deployment of its environment created later is queued, building or
// ready: an older build that finishes last never replaces a newer one (newest requested wins).
// A build that already finished is ErrBuildFinished and is left as it is.
func (s *Deployments) FinishBuild(ctx context.Context, buildID string, o BuildOutcome) (Deployment, error) {
	var d Deployment
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var b Build
		if err := tx.Where("id = ?", buildID).Take(&b).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return ErrBuildNotFound
			}
			return fmt.Errorf("load build: %w", err)
		}
		if err := lockEnv(tx, b.AgentID, b.Environment); err != nil {
			return err
		}
		if b.Status != BuildQueued && b.Status != BuildRunning {
			return ErrBuildFinished
		}
		now := s.now()
		status, dstatus := BuildSucceeded, StatusReady
		if o.Error != "" {
			status, dstatus = BuildFailed, StatusFailed
		}
		if err := tx.Model(&Build{}).Where("id = ?", b.ID).
			Updates(map[string]any{"status": status, "error": o.Error, "steps": o.Steps, "finished_at": now}).Error; err != nil {
			return fmt.Errorf("finish build: %w", err)
		}
		upd := map[string]any{"status": dstatus, "error": o.Error, "bundle_key": o.BundleKey, "digest": o.Digest}
		if o.Error == "" {
			upd["ready_at"] = now
		}
		if err := tx.Model(&Deployment{}).Where("id = ?", b.DeployID).Updates(upd).Error; err != nil {
			return fmt.Errorf("finish deployment: %w", err)
		}
		if err := tx.Where("id = ?", b.DeployID).Take(&d).Error; err != nil {
			return fmt.Errorf("load deployment: %w", err)
		}
		if o.Error != "" {
			return nil
		}
		var newer *Deployment
		if o.Activate {
			n, err := newerDeployment(tx, d)
			if err != nil {
				return err
			}
			if newer = n; newer == nil {
				if d, err = s.activate(tx, d, "build", o.Actor); err != nil {
					return err
				}
			}
		}
		if o.Done != nil {
			if err := appendLog(tx, b.ID, "done", o.Done(d, newer)); err != nil {
				return err
			}
		}
		return nil
	})
	return d, err
}

// newerDeployment returns the newest deployment of d's agent and environment that was created
// after d and is queued, building or ready (active or not), or nil when there is none. Creation
// order is created_at, then id for equal times; StartBuild and Promote create each deployment
// strictly after the newest one of its environment (creationTime), so for them it is the order
// in which they were requested. A later deployment that failed or was cancelled does not count.
func newerDeployment(tx *gorm.DB, d Deployment) (*Deployment, error) {
	var ds []Deployment
	err := tx.Where("agent_id = ? AND environment = ? AND id <> ? AND status IN ?",
		d.AgentID, d.Environment, d.ID, []string{StatusQueued, StatusBuilding, StatusReady}).
		Where("(created_at > (SELECT created_at FROM deployments WHERE id = ?) OR (created_at = (SELECT created_at FROM deployments WHERE id = ?) AND id > ?))",
			d.ID, d.ID, d.ID).
		Order("created_at DESC, id DESC").Limit(1).Find(&ds).Error
	if err != nil {
		return nil, fmt.Errorf("find newer deployment: %w", err)
	}
	if len(ds) == 0 {
		return nil, nil
	}
	return &ds[0], nil
}

// creationTime is the created_at of a new deployment of the environment, inside tx, which holds
// the env lock: now at microsecond precision (what Postgres keeps), but strictly after the newest
// deployment of the environment, so that creation order is request order even when the clocks
// of processes disagree.
func (s *Deployments) creationTime(tx *gorm.DB, agentID, env string) (time.Time, error) {
	now := s.now().Truncate(time.Microsecond)
	var last []Deployment
	err := tx.Select("created_at").Where("agent_id = ? AND environment = ?", agentID, env).
		Order("created_at DESC").Limit(1).Find(&last).Error
	if err != nil {
		return time.Time{}, fmt.Errorf("find newest deployment: %w", err)
	}
	if len(last) == 1 && !now.After(last[0].CreatedAt) {
		now = last[0].CreatedAt.UTC().Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return now, nil
}

// activate makes d the active deployment of its environment inside tx, which holds the env lock.
func (s *Deployments) activate(tx *gorm.DB, d Deployment, action, actor string) (Deployment, error) {
	if d.Status != StatusReady {
		return Deployment{}, ErrBuildNotReady
	}
	var prev Deployment
	err := tx.Where("agent_id = ? AND environment = ? AND is_active = ?", d.AgentID, d.Environment, true).Take(&prev).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return Deployment{}, fmt.Errorf("find active deployment: %w", err)
	}
	now := s.now()
	if prev.ID != "" && prev.ID != d.ID {
		if err := tx.Model(&Deployment{}).Where("id = ?", prev.ID).Update("is_active", false).Error; err != nil {
			return Deployment{}, fmt.Errorf("deactivate %s: %w", prev.ID, err)
		}
	}
	if err := tx.Model(&Deployment{}).Where("id = ?", d.ID).Updates(map[string]any{"is_active": true, "activated_at": now}).Error; err != nil {
		return Deployment{}, fmt.Errorf("activate %s: %w", d.ID, err)
	}
	rec := Activation{AgentID: d.AgentID, Environment: d.Environment, Action: action, FromDeployID: prev.ID, ToDeployID: d.ID, Actor: actor, CreatedAt: now}
	if err := tx.Create(&rec).Error; err != nil {
		return Deployment{}, fmt.Errorf("record activation: %w", err)
	}
	d.IsActive, d.ActivatedAt = true, &now
	return d, nil
}

// Activate makes a ready deployment the active one of its own environment; the previous active
// one becomes inactive. Nothing crosses environments. A deployment that is not ready is ErrBuildNotReady.
func (s *Deployments) Activate(ctx context.Context, deployID, actor string) (Deployment, error) {
	var out Deployment
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		d, err := s.lockedDeployment(tx, deployID)
		if err != nil {
			return err
		}
		out, err = s.activate(tx, d, "activate", actor)
		return err
	})
	return out, err
}

func (s *Deployments) lockedDeployment(tx *gorm.DB, deployID string) (Deployment, error) {
	var d Deployment
	if err := tx.Where("id = ?", deployID).Take(&d).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return Deployment{}, ErrDeploymentNotFound
		}
		return Deployment{}, fmt.Errorf("load deployment: %w", err)
	}
	if err := lockEnv(tx, d.AgentID, d.Environment); err != nil {
		return Deployment{}, err
	}
	// Re-read under the lock: another transition may have changed it.
	if err := tx.Where("id = ?", deployID).Take(&d).Error; err != nil {
		return Deployment{}, fmt.Errorf("reload deployment: %w", err)
	}
	return d, nil
}

// Rollback activates deployID in env, or, when deployID is "", the most recently activated
// inactive deployment of env that is ready and was live before. With none: ErrNothingToRollBack
// and the active deployment unchanged.
func (s *Deployments) Rollback(ctx context.Context, agentID, env, deployID, actor string) (Deployment, error) {
	if env == "" {
		env = Production
	}
	var out Deployment
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lockEnv(tx, agentID, env); err != nil {
			return err
		}
		d, err := rollbackTarget(tx, agentID, env, deployID)
		if err != nil {
			return err
		}
		out, err = s.activate(tx, d, "rollback", actor)
		return err
	})
	return out, err
}

// RollbackTarget returns the deployment Rollback would activate now, without changing anything:
// deployID itself (which must be in env), or the most recently activated inactive ready one.
func (s *Deployments) RollbackTarget(ctx context.Context, agentID, env, deployID string) (Deployment, error) {
	if env == "" {
		env = Production
	}
	return rollbackTarget(s.db.WithContext(ctx), agentID, env, deployID)
}

// rollbackTarget reads the rollback target on db (a transaction holding the env lock, or not).
func rollbackTarget(db *gorm.DB, agentID, env, deployID string) (Deployment, error) {
	var d Deployment
	if deployID != "" {
		err := db.Where("id = ? AND agent_id = ?", deployID, agentID).Take(&d).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return d, ErrDeploymentNotFound
		}
		if err != nil {
			return d, fmt.Errorf("load deployment: %w", err)
		}
		if d.Environment != env {
			return d, fmt.Errorf("%w: deployment %s is in %s, not %s", ErrDeploymentNotFound, d.ID, d.Environment, env)
		}
		return d, nil
	}
	err := db.Where("agent_id = ? AND environment = ? AND is_active = ? AND status = ? AND activated_at IS NOT NULL",
		agentID, env, false, StatusReady).Order("activated_at DESC, id DESC").Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return d, ErrNothingToRollBack
	}
	if err != nil {
		return d, fmt.Errorf("find rollback target: %w", err)
	}
	return d, nil
}

// PromotionGate decides whether a commit may be promoted (spec 3.1): CommitStatuses implements it.
type PromotionGate interface {
	// Blocks reports whether the commit's gate blocks promotion, with the state that decided.
	Blocks(ctx context.Context, agentID, commit string) (blocked bool, state string, err error)
}

// PromoteRequest copies the active deployment of From into a new deployment of To.
type PromoteRequest struct {
	AgentID string
	From    string
	To      string // default production
	Force   bool
	Actor   string
	// Gate decides whether the source commit's evals status blocks (git sources only); nil: no gate.
	Gate PromotionGate
	// Copy copies the bundle to its destination key (may be the same key: bundles are content
	// addressed); an error is ErrBundleUnavailable.
	Copy func(ctx context.Context, src Deployment) (dstKey string, err error)
}

// Promote creates a new deployment in To from the active one of From and activates it, whatever
// autoPromoteProduction says. The source environment is untouched; on any failure the
// destination is unchanged.
func (s *Deployments) Promote(ctx context.Context, req PromoteRequest) (Deployment, error) {
	if req.To == "" {
		req.To = Production
	}
	src, err := s.Active(ctx, req.AgentID, req.From)
	if err != nil {
		return Deployment{}, err
	}
	if src.Status != StatusReady || src.BundleKey == "" {
		return Deployment{}, ErrBundleUnavailable
	}
	if req.Gate != nil && !req.Force {
		blocked, state, err := req.Gate.Blocks(ctx, req.AgentID, src.CommitSHA)
		if err != nil {
			return Deployment{}, err
		}
		if blocked {
			return Deployment{}, fmt.Errorf("%w: svc/evals is %s for commit %s", ErrEvalGateBlocked, state, src.CommitSHA)
		}
	}
	key := src.BundleKey
	if req.Copy != nil {
		key, err = req.Copy(ctx, src)
		if err != nil {
			return Deployment{}, fmt.Errorf("%w: %w", ErrBundleUnavailable, err)
		}
	}
	var out Deployment
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lockEnv(tx, req.AgentID, req.To); err != nil {
			return err
		}
		now, err := s.creationTime(tx, req.AgentID, req.To)
		if err != nil {
			return err
		}
		b := Build{
			ID: auth.NewID("b"), AgentID: req.AgentID, DeployID: auth.NewID("d"), Environment: req.To,
			Branch: src.Branch, CommitSHA: src.CommitSHA, SourceVersionID: src.SourceVersionID, Trigger: "promote",
			Status: BuildSucceeded, Steps: `[{"name":"promote","status":"succeeded","durationMs":0}]`, CreatedAt: now, StartedAt: &now, FinishedAt: &now,
		}
		d := Deployment{
			ID: b.DeployID, AgentID: req.AgentID, BuildID: b.ID, Environment: req.To, Branch: src.Branch, CommitSHA: src.CommitSHA,
			SourceVersionID: src.SourceVersionID, Status: StatusReady, BundleKey: key, Digest: src.Digest,
			PromotedFrom: src.ID, CreatedAt: now, ReadyAt: &now,
		}
		if err := tx.Create(&b).Error; err != nil {
			return fmt.Errorf("create promotion build: %w", err)
		}
		if err := tx.Create(&d).Error; err != nil {
			return fmt.Errorf("create promoted deployment: %w", err)
		}
		out, err = s.activate(tx, d, "promote", req.Actor)
		return err
	})
	return out, err
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
	res := s.db.WithContext(ctx).Model(&Deployment{}).Where("id = ?", deployID).Update("runtime_stopped", stopped)
	if res.Error != nil {
		return Deployment{}, fmt.Errorf("set runtime state: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return Deployment{}, ErrDeploymentNotFound
	}
	return s.Get(ctx, deployID)
}

// Activations lists an environment's (or, with env "", every) recorded transitions, newest first.
func (s *Deployments) Activations(ctx context.Context, agentID, env string, limit int) ([]Activation, error) {
	q := s.db.WithContext(ctx).Where("agent_id = ?", agentID)
	if env != "" {
		q = q.Where("environment = ?", env)
	}
	if limit <= 0 || limit > 500 {
		limit = 500
	}
	var as []Activation
	if err := q.Order("id DESC").Limit(limit).Find(&as).Error; err != nil {
		return nil, fmt.Errorf("list activations: %w", err)
	}
	return as, nil
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
