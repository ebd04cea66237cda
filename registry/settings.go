package registry

import (
	"cmp"
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
	m, err := s.getMany(db, []string{agentID})
	return m[agentID], err
}

// GetMany returns the settings of each of agentIDs with defaults applied, in two queries
// whatever their number. It does not check that the agents exist.
func (s *Settings) GetMany(ctx context.Context, agentIDs []string) (map[string]DeploySettings, error) {
	return s.getMany(s.db.WithContext(ctx), agentIDs)
}

func (s *Settings) getMany(db *gorm.DB, agentIDs []string) (map[string]DeploySettings, error) {
	if len(agentIDs) == 0 {
		return map[string]DeploySettings{}, nil
	}
	var rows []settingsRow
	if err := db.Where("agent_id IN ?", agentIDs).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("get deploy settings: %w", err)
	}
	byID := make(map[string]settingsRow, len(rows))
	for _, r := range rows {
		byID[r.AgentID] = r
	}
	out := make(map[string]DeploySettings, len(agentIDs))
	var unset []string // whose production branch defaults to the source's default branch
	for _, id := range agentIDs {
		row := byID[id]
		out[id] = DeploySettings{
			AgentID: id, ProductionBranch: row.ProductionBranch, ProductionBranchSet: row.ProductionBranch != "",
			AutoDeploy: row.AutoDeploy, AutoPromoteProduction: row.AutoPromoteProduction,
		}
		if row.ProductionBranch == "" {
			unset = append(unset, id)
		}
	}
	if len(unset) == 0 {
		return out, nil
	}
	var sources []sourceRow
	if err := db.Select("agent_id, default_branch").Where("agent_id IN ?", unset).Find(&sources).Error; err != nil {
		return nil, fmt.Errorf("get deploy settings: %w", err)
	}
	branches := make(map[string]string, len(sources))
	for _, r := range sources {
		branches[r.AgentID] = r.DefaultBranch
	}
	for _, id := range unset {
		st := out[id]
		st.ProductionBranch = cmp.Or(branches[id], DefaultBranch)
		out[id] = st
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
