package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"svc/auth"
)

// Errors of the entity stores (agents, sources, settings, secrets, source versions, commit statuses).
var (
	// ErrAgentNotFound means no agent has the given id or slug.
	ErrAgentNotFound = errors.New("registry: agent not found")
	// ErrConflict means the record clashes with an existing one (an agent slug already taken).
	ErrConflict = errors.New("registry: conflict")
	// ErrInvalid is matched (errors.Is) by every *InvalidError.
	ErrInvalid = errors.New("registry: invalid input")
)

// InvalidError is an input a store refuses; Field names it the way API clients spell it
// ("slug", "url", "productionBranch"). It matches ErrInvalid.
type InvalidError struct {
	Field  string
	Reason string
}

// Error returns "<field>: <reason>".
func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Agent limits.
const (
	MaxSlugLen      = 40  // a slug is a DNS label of at most 40 characters (CONTRACT §2)
	MaxAgentNameLen = 100 // characters
)

// Agent is a deployable agent: the unit that owns a source, settings, secrets and deployments.
type Agent struct {
	ID        string `gorm:"primaryKey"`
	Slug      string
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TableName names the table of Agent.
func (Agent) TableName() string { return "agents" }

// Agents stores agents. It is safe for concurrent use, across processes.
type Agents struct {
	db *gorm.DB
}

// NewAgents returns the agent store over db (migrated by package migrations).
func NewAgents(db *gorm.DB) *Agents { return &Agents{db: db} }

// Create makes an agent called name. An empty slug is derived from name (lower-cased, runs of
// other characters turned into one hyphen, cut to MaxSlugLen) and made unique with a "-2", "-3"...
// suffix; a given slug must be a valid one (ValidateSlug) and free, else ErrConflict.
func (s *Agents) Create(ctx context.Context, name, slug string) (Agent, error) {
	name = strings.TrimSpace(name)
	if err := validateAgentName(name); err != nil {
		return Agent{}, err
	}
	now := time.Now().UTC()
	a := Agent{ID: auth.NewID("a"), Name: name, CreatedAt: now, UpdatedAt: now}
	if slug != "" {
		if err := ValidateSlug(slug); err != nil {
			return Agent{}, err
		}
		a.Slug = slug
		if err := s.db.WithContext(ctx).Create(&a).Error; err != nil {
			if errors.Is(err, gorm.ErrDuplicatedKey) {
				return Agent{}, fmt.Errorf("%w: slug %q is taken", ErrConflict, slug)
			}
			return Agent{}, fmt.Errorf("create agent: %w", err)
		}
		return a, nil
	}
	base := DeriveSlug(name)
	for n := 1; ; n++ {
		a.Slug = slugCandidate(base, n)
		err := s.db.WithContext(ctx).Create(&a).Error
		if err == nil {
			return a, nil
		}
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			return Agent{}, fmt.Errorf("create agent: %w", err)
		}
		if n >= 1000 {
			return Agent{}, fmt.Errorf("%w: no free slug derived from %q", ErrConflict, name)
		}
	}
}

// Get returns the agent with id, or ErrAgentNotFound.
func (s *Agents) Get(ctx context.Context, id string) (Agent, error) {
	return s.take(ctx, "id = ?", id)
}

// GetBySlug returns the agent with slug, or ErrAgentNotFound.
func (s *Agents) GetBySlug(ctx context.Context, slug string) (Agent, error) {
	return s.take(ctx, "slug = ?", slug)
}

// Resolve returns the agent whose id or slug is ref, or ErrAgentNotFound: how every route and
// command that names an agent finds it. The two cannot be confused: an id is "a" and 16
// characters of [a-z2-7], a shape ValidateSlug refuses and DeriveSlug never makes. (A slug of
// that shape made before that rule is found by its slug unless an agent has it as its id,
// which wins.)
func (s *Agents) Resolve(ctx context.Context, ref string) (Agent, error) {
	if ref == "" {
		return Agent{}, ErrAgentNotFound
	}
	var as []Agent
	if err := s.db.WithContext(ctx).Where("id = ? OR slug = ?", ref, ref).Limit(2).Find(&as).Error; err != nil {
		return Agent{}, fmt.Errorf("resolve agent: %w", err)
	}
	switch {
	case len(as) == 0:
		return Agent{}, ErrAgentNotFound
	case len(as) == 2 && as[1].ID == ref:
		return as[1].utc(), nil
	}
	return as[0].utc(), nil
}

// looksLikeAgentID reports whether s has the shape of an agent id (auth.NewID("a")).
func looksLikeAgentID(s string) bool {
	if len(s) != 17 || s[0] != 'a' {
		return false
	}
	return strings.Trim(s[1:], "abcdefghijklmnopqrstuvwxyz234567") == ""
}

func (s *Agents) take(ctx context.Context, where, arg string) (Agent, error) {
	var a Agent
	err := s.db.WithContext(ctx).Where(where, arg).Take(&a).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Agent{}, ErrAgentNotFound
	}
	if err != nil {
		return Agent{}, fmt.Errorf("get agent: %w", err)
	}
	return a.utc(), nil
}

// List returns every agent, oldest first.
func (s *Agents) List(ctx context.Context) ([]Agent, error) {
	var as []Agent
	if err := s.db.WithContext(ctx).Order("created_at, id").Find(&as).Error; err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	for i := range as {
		as[i] = as[i].utc()
	}
	return as, nil
}

func (a Agent) utc() Agent {
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return a
}

func validateAgentName(name string) error {
	switch {
	case name == "":
		return invalid("name", "is required")
	case !utf8.ValidString(name):
		return invalid("name", "is not valid UTF-8")
	case utf8.RuneCountInString(name) > MaxAgentNameLen:
		return invalid("name", "is longer than %d characters", MaxAgentNameLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return invalid("name", "contains a control character")
	}
	return nil
}

// ValidateSlug reports whether slug is a valid agent slug: 1 to MaxSlugLen characters of
// [a-z0-9-], starting and ending with a letter or digit, without "--" (which separates a
// deployment id from the slug in pinned host names), and not of the shape of an agent id. The error is an *InvalidError for "slug".
func ValidateSlug(slug string) error {
	switch {
	case slug == "":
		return invalid("slug", "is empty")
	case len(slug) > MaxSlugLen:
		return invalid("slug", "is longer than %d characters", MaxSlugLen)
	case strings.Trim(slug, "abcdefghijklmnopqrstuvwxyz0123456789-") != "":
		return invalid("slug", "may hold only lowercase letters, digits and hyphens")
	case slug[0] == '-' || slug[len(slug)-1] == '-':
		return invalid("slug", "must start and end with a letter or digit")
	case strings.Contains(slug, "--"):
		return invalid("slug", `must not contain "--"`)
	case looksLikeAgentID(slug):
		return invalid("slug", `has the shape of an agent id ("a" and 16 letters or digits 2-7): routes take ids and slugs alike, so it would be ambiguous`)
	}
	return nil
}

// DeriveSlug turns a name into a valid slug: lower-cased ASCII letters and digits, every other
// run of characters one hyphen, cut to MaxSlugLen; "agent" when nothing is left, and "-agent"
// added to one that would have the shape of an agent id.
func DeriveSlug(name string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(r)
			continue
		}
		hyphen = true
	}
	slug := trimSlug(b.String(), MaxSlugLen)
	switch {
	case slug == "":
		return "agent"
	case looksLikeAgentID(slug):
		return slug + "-agent" // never the shape of an id (see Resolve)
	}
	return slug
}

// slugCandidate is base for n == 1, else base cut short enough to carry "-n".
func slugCandidate(base string, n int) string {
	if n == 1 {
		return base
	}
	suffix := "-" + strconv.Itoa(n)
	return trimSlug(base, MaxSlugLen-len(suffix)) + suffix
}

// trimSlug cuts s to at most n bytes and drops hyphens left at its end.
func trimSlug(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimRight(s, "-")
}
