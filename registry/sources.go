package registry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrSourceNotFound means the agent has no source yet.
var ErrSourceNotFound = errors.New("registry: source not found")

// SourceType says where an agent's source lives.
type SourceType string

// The source types of CONTRACT §3.
const (
	// SourceGit is a git repository, built from a commit on a branch.
	SourceGit SourceType = "git"
	// SourceHosted is source uploaded to the service as source versions.
	SourceHosted SourceType = "hosted"
)

// DefaultBranch is the branch used when a git source names none.
const DefaultBranch = "main"

// Source limits.
const (
	MaxSourceURLLen     = 2048
	MaxWebhookSecretLen = 1024
)

var envRefPattern = regexp.MustCompile(`^env:[A-Z_][A-Z0-9_]*$`)

// Source is an agent's source as callers see it: the webhook secret in clear (for signature
// checks), never the ciphertext. Never serialise it as is: API DTOs leave the secret out.
type Source struct {
	AgentID       string
	Type          SourceType
	URL           string // git only
	NormalizedURL string // host/path form of URL for webhook matching; "" when URL has no host (file://, paths)
	DefaultBranch string // git only; DefaultBranch when not given
	WebhookSecret string // git only; "" when none
	Credentials   string // git only; "env:VAR" or ""
	UpdatedAt     time.Time
}

// SourceSpec is what Put takes: a git repository or hosted source.
type SourceSpec struct {
	Type          SourceType
	URL           string
	DefaultBranch string
	WebhookSecret string
	Credentials   string
}

// sourceRow is a source as stored, the webhook secret sealed.
type sourceRow struct {
	AgentID       string `gorm:"primaryKey"`
	Type          string
	URL           string
	NormalizedURL string
	DefaultBranch string
	WebhookSecret []byte
	Credentials   string
	UpdatedAt     time.Time
}

// TableName names the table of sourceRow.
func (sourceRow) TableName() string { return "sources" }

// Sources stores each agent's one source. Webhook secrets are sealed with a Cipher. Safe for
// concurrent use.
type Sources struct {
	db        *gorm.DB
	cipher    *Cipher
	normalize func(string) string
}

// NewSources returns the source store over db. Webhook secrets are sealed with c; normalize
// reduces a repository URL to the form webhooks match on (webhook.NormalizeRepoURL), returning ""
// for a URL that can never match.
func NewSources(db *gorm.DB, c *Cipher, normalize func(string) string) *Sources {
	return &Sources{db: db, cipher: c, normalize: normalize}
}

func webhookContext(agentID string) string { return "svc/source-webhook\x00" + agentID }

// Put sets the source of agentID, replacing the earlier one whole (an absent webhook secret
// clears it). A bad spec is an *InvalidError naming the field; an unknown agent is ErrAgentNotFound.
func (s *Sources) Put(ctx context.Context, agentID string, spec SourceSpec) (Source, error) {
	if err := s.validate(&spec); err != nil {
		return Source{}, err
	}
	row := sourceRow{
		AgentID: agentID, Type: string(spec.Type), URL: spec.URL, DefaultBranch: spec.DefaultBranch,
		Credentials: spec.Credentials, UpdatedAt: time.Now().UTC(),
	}
	if spec.Type == SourceGit {
		row.NormalizedURL = s.normalize(spec.URL)
	}
	if spec.WebhookSecret != "" {
		row.WebhookSecret = s.cipher.Seal([]byte(spec.WebhookSecret), webhookContext(agentID))
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "agent_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"type", "url", "normalized_url", "default_branch", "webhook_secret", "credentials", "updated_at"}),
	}).Create(&row).Error
	if errors.Is(err, gorm.ErrForeignKeyViolated) {
		return Source{}, ErrAgentNotFound
	}
	if err != nil {
		return Source{}, fmt.Errorf("put source: %w", err)
	}
	return s.fromRow(row)
}

// validate checks spec and fills its defaults.
func (s *Sources) validate(spec *SourceSpec) error {
	switch spec.Type {
	case SourceHosted:
		for _, f := range [...]struct{ name, value string }{
			{"url", spec.URL}, {"defaultBranch", spec.DefaultBranch}, {"webhookSecret", spec.WebhookSecret}, {"credentials", spec.Credentials},
		} {
			if f.value != "" {
				return invalid(f.name, "is not allowed for a hosted source")
			}
		}
		return nil
	case SourceGit:
	case "":
		return invalid("type", `is required ("git" or "hosted")`)
	default:
		return invalid("type", `must be "git" or "hosted"`)
	}
	if err := validateRepoURL(spec.URL); err != nil {
		return err
	}
	if spec.DefaultBranch == "" {
		spec.DefaultBranch = DefaultBranch
	} else if err := ValidateBranch("defaultBranch", spec.DefaultBranch); err != nil {
		return err
	}
	if len(spec.WebhookSecret) > MaxWebhookSecretLen {
		return invalid("webhookSecret", "is longer than %d bytes", MaxWebhookSecretLen)
	}
	if spec.Credentials != "" && !envRefPattern.MatchString(spec.Credentials) {
		return invalid("credentials", `must be an environment reference "env:VAR" (VAR matching [A-Z_][A-Z0-9_]*)`)
	}
	return nil
}

// validateRepoURL accepts http(s)://, ssh://, git:// and file:// URLs, scp-like user@host:path
// and absolute paths; never a URL that carries a password (credentials go in "credentials").
func validateRepoURL(raw string) error {
	switch {
	case raw == "":
		return invalid("url", "is required for a git source")
	case len(raw) > MaxSourceURLLen:
		return invalid("url", "is longer than %d characters", MaxSourceURLLen)
	case strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return invalid("url", "contains whitespace or a control character")
	case strings.HasPrefix(raw, "-"):
		return invalid("url", `must not start with "-"`)
	}
	if !strings.Contains(raw, "://") {
		if strings.HasPrefix(raw, "/") {
			return nil // a local path, for the embedded server
		}
		host, path, ok := strings.Cut(raw, ":")
		if !ok || host == "" || path == "" || strings.Contains(host, "/") {
			return invalid("url", "must be a URL (https://, ssh://, git://, file://), user@host:path or an absolute path")
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("url", "is not a valid URL")
	}
	switch u.Scheme {
	case "http", "https", "ssh", "git":
		if u.Host == "" {
			return invalid("url", "has no host")
		}
	case "file":
	default:
		return invalid("url", "scheme %q is not supported (https, http, ssh, git, file)", u.Scheme)
	}
	if _, has := u.User.Password(); has {
		return invalid("url", `must not carry a password; use "credentials": "env:VAR"`)
	}
	return nil
}

// Get returns the source of agentID, or ErrSourceNotFound.
func (s *Sources) Get(ctx context.Context, agentID string) (Source, error) {
	var row sourceRow
	err := s.db.WithContext(ctx).Where("agent_id = ?", agentID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Source{}, ErrSourceNotFound
	}
	if err != nil {
		return Source{}, fmt.Errorf("get source: %w", err)
	}
	return s.fromRow(row)
}

// GetMany returns the sources of those of agentIDs that have one, by agent id, in one query.
func (s *Sources) GetMany(ctx context.Context, agentIDs []string) (map[string]Source, error) {
	if len(agentIDs) == 0 {
		return map[string]Source{}, nil
	}
	var rows []sourceRow
	if err := s.db.WithContext(ctx).Where("agent_id IN ?", agentIDs).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("get sources: %w", err)
	}
	out := make(map[string]Source, len(rows))
	for _, row := range rows {
		src, err := s.fromRow(row)
		if err != nil {
			return nil, err
		}
		out[row.AgentID] = src
	}
	return out, nil
}

// FindByRepoURL returns the git sources whose repository is repoURL in any of its spellings
// (clone, SSH or web URL; scheme, case, trailing "/" and ".git" ignored), oldest agent first. A URL that normalizes to ""
// matches nothing.
func (s *Sources) FindByRepoURL(ctx context.Context, repoURL string) ([]Source, error) {
	n := s.normalize(repoURL)
	if n == "" {
		return nil, nil
	}
	var rows []sourceRow
	// Hosts are case-insensitive, and so are the paths of GitHub, GitLab and Gitea: the match
	// ignores case. It is made here rather than in the stored column, which keeps the URL's
	// spelling (rows written before matching ignored case included); one database function lowers
	// both sides so that they agree on any letter. (A full scan of the sources: one row per agent.)
	err := s.db.WithContext(ctx).Where("type = ? AND LOWER(normalized_url) = LOWER(?)", string(SourceGit), n).Order("agent_id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("find source by repository: %w", err)
	}
	out := make([]Source, 0, len(rows))
	for _, row := range rows {
		src, err := s.fromRow(row)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, nil
}

func (s *Sources) fromRow(row sourceRow) (Source, error) {
	src := Source{
		AgentID: row.AgentID, Type: SourceType(row.Type), URL: row.URL, NormalizedURL: row.NormalizedURL,
		DefaultBranch: row.DefaultBranch, Credentials: row.Credentials, UpdatedAt: row.UpdatedAt.UTC(),
	}
	if len(row.WebhookSecret) > 0 {
		plain, err := s.cipher.Open(row.WebhookSecret, webhookContext(row.AgentID))
		if err != nil {
			return Source{}, fmt.Errorf("open webhook secret of agent %s: %w", row.AgentID, err)
		}
		src.WebhookSecret = string(plain)
	}
	return src, nil
}

// ValidateBranch reports whether name is a usable branch name (the rules of git
// check-ref-format that matter here); the error is an *InvalidError for field.
func ValidateBranch(field, name string) error {
	switch {
	case name == "":
		return invalid(field, "is empty")
	case len(name) > 255:
		return invalid(field, "is longer than 255 characters")
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return invalid(field, "contains whitespace or a control character")
	case strings.ContainsAny(name, `~^:?*[\`):
		return invalid(field, "contains one of ~ ^ : ? * [ \\")
	case strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//"):
		return invalid(field, `contains "..", "@{" or "//"`)
	case strings.HasPrefix(name, "-") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") || name == "@":
		return invalid(field, "is not a valid branch name")
	}
	return nil
}
