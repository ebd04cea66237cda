package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"
)

// ErrCommitStatusNotFound means no status was ever reported for that commit and context.
var ErrCommitStatusNotFound = errors.New("registry: commit status not found")

// CommitState is the state of a commit status.
type CommitState string

// The commit states of CONTRACT §3.
const (
	StatePending CommitState = "pending"
	StateSuccess CommitState = "success"
	StateFailure CommitState = "failure"
	StateError   CommitState = "error"
)

// Valid reports whether s is one of the four states.
func (s CommitState) Valid() bool {
	switch s {
	case StatePending, StateSuccess, StateFailure, StateError:
		return true
	}
	return false
}

// EvalsContext is the commit status context that gates promotion from a git source.
const EvalsContext = "svc/evals"

// Commit status limits.
const (
	MaxStatusContextLen     = 255
	MaxStatusDescriptionLen = 1024
)

// CommitStatus is one reported state of a commit in a context; the latest per (commit, context) counts.
type CommitStatus struct {
	ID          int64 `gorm:"primaryKey"`
	AgentID     string
	Commit      string `gorm:"column:commit_sha"`
	Context     string
	State       CommitState
	Description string
	CreatedAt   time.Time
}

// TableName names the table of CommitStatus.
func (CommitStatus) TableName() string { return "commit_statuses" }

// CommitStatuses stores reported commit statuses, append only. Safe for concurrent use.
type CommitStatuses struct {
	db *gorm.DB
}

// NewCommitStatuses returns the commit status store over db.
func NewCommitStatuses(db *gorm.DB) *CommitStatuses { return &CommitStatuses{db: db} }

// Add records st (ID and CreatedAt are set here) and returns it. The commit must be a full SHA
// (40 or 64 hex digits; stored lower-case); a bad field is an *InvalidError, an unknown agent
// ErrAgentNotFound.
func (s *CommitStatuses) Add(ctx context.Context, st CommitStatus) (CommitStatus, error) {
	st.Commit = strings.ToLower(st.Commit)
	if err := validateCommitStatus(st); err != nil {
		return CommitStatus{}, err
	}
	st.ID = 0
	st.CreatedAt = time.Now().UTC()
	err := s.db.WithContext(ctx).Create(&st).Error
	if errors.Is(err, gorm.ErrForeignKeyViolated) {
		return CommitStatus{}, ErrAgentNotFound
	}
	if err != nil {
		return CommitStatus{}, fmt.Errorf("add commit status: %w", err)
	}
	return st, nil
}

func validateCommitStatus(st CommitStatus) error {
	if err := ValidateCommit("commit", st.Commit); err != nil {
		return err
	}
	switch {
	case st.Context == "":
		return invalid("context", "is required")
	case len(st.Context) > MaxStatusContextLen:
		return invalid("context", "is longer than %d bytes", MaxStatusContextLen)
	case strings.IndexFunc(st.Context, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 || !utf8.ValidString(st.Context):
		return invalid("context", "contains whitespace or a control character")
	case st.State == "":
		return invalid("state", "is required (pending, success, failure or error)")
	case !st.State.Valid():
		return invalid("state", "must be pending, success, failure or error")
	case len(st.Description) > MaxStatusDescriptionLen:
		return invalid("description", "is longer than %d bytes", MaxStatusDescriptionLen)
	case !utf8.ValidString(st.Description):
		return invalid("description", "is not valid UTF-8")
	}
	return nil
}

// ValidateCommit reports whether sha is a full lower-case commit id: 40 (SHA-1) or 64 (SHA-256)
// hex digits. The error is an *InvalidError for field.
func ValidateCommit(field, sha string) error {
	if (len(sha) != 40 && len(sha) != 64) || strings.Trim(sha, "0123456789abcdef") != "" {
		return invalid(field, "must be a full commit SHA (40 or 64 hex digits)")
	}
	return nil
}

var _ PromotionGate = (*CommitStatuses)(nil)

// Blocks implements PromotionGate: the commit's latest svc/evals status blocks while it is
// pending, failure or error; a commit with none does not block.
func (s *CommitStatuses) Blocks(ctx context.Context, agentID, commit string) (bool, string, error) {
	st, err := s.Latest(ctx, agentID, commit, EvalsContext)
	if errors.Is(err, ErrCommitStatusNotFound) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	switch st.State {
	case StatePending, StateFailure, StateError:
		return true, string(st.State), nil
	}
	return false, string(st.State), nil
}

// Latest returns the newest status of commit in statusContext (such as EvalsContext) for agentID, or ErrCommitStatusNotFound.
func (s *CommitStatuses) Latest(ctx context.Context, agentID, commit, statusContext string) (CommitStatus, error) {
	var st CommitStatus
	err := s.db.WithContext(ctx).
		Where("agent_id = ? AND commit_sha = ? AND context = ?", agentID, strings.ToLower(commit), statusContext).
		Order("id DESC").Take(&st).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return CommitStatus{}, ErrCommitStatusNotFound
	}
	if err != nil {
		return CommitStatus{}, fmt.Errorf("latest commit status: %w", err)
	}
	st.CreatedAt = st.CreatedAt.UTC()
	return st, nil
}

// List returns a commit's statuses, newest first (at most 500).
func (s *CommitStatuses) List(ctx context.Context, agentID, commit string) ([]CommitStatus, error) {
	var out []CommitStatus
	err := s.db.WithContext(ctx).Where("agent_id = ? AND commit_sha = ?", agentID, strings.ToLower(commit)).
		Order("created_at DESC, id DESC").Limit(500).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("list commit statuses: %w", err)
	}
	return out, nil
}
