package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DeploySettings are an agent's deploy settings (spec 2.2), with defaults applied.
type DeploySettings struct {
	AgentID string
	// ProductionBranch is the branch whose pushes build production: as set, else the source's
	// default branch, else DefaultBranch.
	ProductionBranch string
	// ProductionBranchSet reports whether ProductionBranch was set rather than defaulted.
	ProductionBranchSet bool
	// AutoDeploy: when false, a push records source only and builds nothing.
	AutoDeploy bool
	// AutoPromoteProduction: when true, a completed production build becomes active.
	AutoPromoteProduction bool
}

// SettingsPatch changes some deploy settings; nil fields stay as they are. An empty
// ProductionBranch returns it to its default.
type SettingsPatch struct {
	ProductionBranch      *string
	AutoDeploy            *bool
	AutoPromoteProduction *bool
}

// settingsRow is deploy settings as stored; ProductionBranch "" means "the default".
type settingsRow struct {
	AgentID               string `gorm:"primaryKey"`
	ProductionBranch      string
	AutoDeploy            bool
	AutoPromoteProduction bool
	UpdatedAt             time.Time
}

// TableName names the table of settingsRow.
func (settingsRow) TableName() string { return "deploy_settings" }

// Settings stores deploy settings. An agent without a row has the defaults of spec 2.2.
// Safe for concurrent use.
type Settings struct {
	db *gorm.DB
}

// NewSettings returns the deploy settings store over db.
func NewSettings(db *gorm.DB) *Settings { return &Settings{db: db} }

// Get returns the settings of agentID with defaults applied. It does not check that the agent exists.
func (s *Settings) Get(ctx context.Context, agentID string) (DeploySettings, error) {
	return s.get(s.db.WithContext(ctx), agentID)
}

func (s *Settings) get(db *gorm.DB, agentID string) (DeploySettings, error) {
	var row settingsRow
	err := db.Where("agent_id = ?", agentID).Take(&row).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return DeploySettings{}, fmt.Errorf("get deploy settings: %w", err)
	}
	out := DeploySettings{
		AgentID: agentID, ProductionBranch: row.ProductionBranch, ProductionBranchSet: row.ProductionBranch != "",
		AutoDeploy: row.AutoDeploy, AutoPromoteProduction: row.AutoPromoteProduction,
	}
	if out.ProductionBranch == "" {
		var branches []string
		err := db.Model(&sourceRow{}).Where("agent_id = ?", agentID).Limit(1).Pluck("default_branch", &branches).Error
		if err != nil {
			return DeploySettings{}, fmt.Errorf("get deploy settings: %w", err)
		}
		out.ProductionBranch = DefaultBranch
		if len(branches) == 1 && branches[0] != "" {
			out.ProductionBranch = branches[0]
		}
	}
	return out, nil
}

// Put applies patch to the settings of agentID and returns the result. A bad branch is an
// *InvalidError for "productionBranch"; an unknown agent is ErrAgentNotFound.
func (s *Settings) Put(ctx context.Context, agentID string, patch SettingsPatch) (DeploySettings, error) {
	if patch.ProductionBranch != nil && *patch.ProductionBranch != "" {
		if err := ValidateBranch("productionBranch", *patch.ProductionBranch); err != nil {
			return DeploySettings{}, err
		}
	}
	// One upsert that assigns only the patched columns, so concurrent patches of different
	// fields never undo each other (no read-modify-write).
	row := settingsRow{AgentID: agentID, UpdatedAt: time.Now().UTC()}
	columns := []string{"updated_at"}
	if patch.ProductionBranch != nil {
		row.ProductionBranch = *patch.ProductionBranch
		columns = append(columns, "production_branch")
	}
	if patch.AutoDeploy != nil {
		row.AutoDeploy = *patch.AutoDeploy
		columns = append(columns, "auto_deploy")
	}
	if patch.AutoPromoteProduction != nil {
		row.AutoPromoteProduction = *patch.AutoPromoteProduction
		columns = append(columns, "auto_promote_production")
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "agent_id"}},
		DoUpdates: clause.AssignmentColumns(columns),
	}).Create(&row).Error
	if errors.Is(err, gorm.ErrForeignKeyViolated) {
		return DeploySettings{}, ErrAgentNotFound
	}
	if err != nil {
		return DeploySettings{}, fmt.Errorf("put deploy settings: %w", err)
	}
	return s.Get(ctx, agentID)
}
