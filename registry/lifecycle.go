package registry

// The deployment state machine: activate, roll back and promote, each one transaction under the
// environment's lock, and the record of activations.

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
	defer s.changed()
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
	defer s.changed()
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
	defer s.changed()
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
			Status: BuildSucceeded, Steps: `[{"name":"promote","status":"succeeded","durationMs":0}]`, Warnings: "[]", CreatedAt: now, StartedAt: &now, FinishedAt: &now,
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
