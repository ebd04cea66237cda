package registry

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Stores is every store of the registry over one database, built once (in cmd/svc) and handed to
// the API, the deploy policy, the build handler and the router, so that no other package holds a
// database handle.
type Stores struct {
	Agents         *Agents
	Sources        *Sources
	Settings       *Settings
	Secrets        *Secrets
	SourceVersions *SourceVersions
	Pushes         *Pushes
	CommitStatuses *CommitStatuses
	Deployments    *Deployments
	BuildLogs      *BuildLogs
	Feedback       *FeedbackStore
	Sessions       *Sessions
	EvalRuns       *EvalRuns
	Runs           *Runs
	Tokens         *Tokens
	APIKeys        *APIKeys
	Access         *Access
	// BrowserSessions are the sign-in sessions on the agents' hosts; the API reads the latest
	// of each session owner for owner_email.
	BrowserSessions *BrowserSessions
	// Automations are the agents' schedules and triggers (CONTRACT §9), their fires and the
	// event ids they saw.
	Automations *Automations
	// Channels are the messaging channels' deliveries seen and their outbox of replies.
	Channels *Channels

	db *gorm.DB
}

// NewStores builds the stores over db: secrets and webhook secrets sealed with cipher, source
// version archives kept in objects, repository URLs compared through normalize (as NewSources).
func NewStores(db *gorm.DB, cipher *Cipher, objects Objects, normalize func(string) string) *Stores {
	return &Stores{
		Agents: NewAgents(db), Sources: NewSources(db, cipher, normalize), Settings: NewSettings(db),
		Secrets: NewSecrets(db, cipher), SourceVersions: NewSourceVersions(db, objects), Pushes: NewPushes(db),
		CommitStatuses: NewCommitStatuses(db), Deployments: NewDeployments(db), BuildLogs: NewBuildLogs(db),
		Feedback: NewFeedback(db), Sessions: NewSessions(db), EvalRuns: NewEvalRuns(db), Runs: NewRuns(db),
		Tokens: NewTokens(db), APIKeys: NewAPIKeys(db), Access: NewAccess(db),
		BrowserSessions: NewBrowserSessions(db), Automations: withCipher(NewAutomations(db), cipher), Channels: NewChannels(db), db: db,
	}
}

// Ping reports whether the database answers.
func (s *Stores) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}
