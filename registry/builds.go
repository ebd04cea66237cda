package registry

// Builds: starting one (or reusing the build of the same commit) and recording how it ended,
// which creates its deployment.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"svc/auth"
)

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
	// Warnings is a JSON array of lines: what the build found that does not fail it.
	Warnings   string
	Attempts   int
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
}

// TableName names the table of Build.
func (Build) TableName() string { return "builds" }

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
			Status: BuildQueued, Steps: "[]", Warnings: "[]", CreatedAt: now,
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

// BuildRunning marks a build running (again, after a crash: attempts counts the runs). A build
// that already finished is ErrBuildFinished, so a redelivered job does nothing.
func (s *Deployments) BuildRunning(ctx context.Context, buildID string) (Build, error) {
	defer s.changed()
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
	Warnings  string // JSON array of lines; "" records none
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
	defer s.changed()
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
			Updates(map[string]any{"status": status, "error": o.Error, "steps": o.Steps, "warnings": cmp.Or(o.Warnings, "[]"), "finished_at": now}).Error; err != nil {
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
