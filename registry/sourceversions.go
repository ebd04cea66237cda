package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"gorm.io/gorm"

	"svc/auth"
)

// ErrSourceVersionNotFound means no source version has the given id (for that agent).
var ErrSourceVersionNotFound = errors.New("registry: source version not found")

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// SourceVersion is one uploaded source tree of a hosted-source agent. The tree itself is a
// tar.gz in the object store under ObjectKey.
type SourceVersion struct {
	ID        string `gorm:"primaryKey"`
	AgentID   string
	Digest    string // "sha256:" of the canonical tree
	ObjectKey string // sources/<agentId>/<id>.tar.gz
	Size      int64  // bytes of the stored archive
	CreatedBy string // token id of the uploader
	CreatedAt time.Time
}

// TableName names the table of SourceVersion.
func (SourceVersion) TableName() string { return "source_versions" }

// NewSourceVersion is what Create takes: the validated tree's archive and digest.
type NewSourceVersion struct {
	AgentID   string
	Digest    string // bundle.Digest of the tree
	CreatedBy string
	Archive   []byte // the tree's canonical tar.gz (bundle.WriteTarGz), stored as it is
}

// SourceVersions stores source versions: the archive in Objects, the record in the database.
// Safe for concurrent use.
type SourceVersions struct {
	db      *gorm.DB
	objects Objects
}

// NewSourceVersions returns the source version store over db, keeping archives in objects.
func NewSourceVersions(db *gorm.DB, objects Objects) *SourceVersions {
	return &SourceVersions{db: db, objects: objects}
}

// SourceVersionKey is the object key of a source version's archive.
func SourceVersionKey(agentID, id string) string { return "sources/" + agentID + "/" + id + ".tar.gz" }

// CommitSourceKey is the object key of the source archive of an agent's git commit (commit is its
// full hash): the tree a push's branch check fetched, stored in the format of a source version's
// archive for the push's build to read instead of fetching the commit again. A commit hash names
// its tree, so the key is content-addressed: two pushes of one commit store the same bytes. The
// object lives only until the build finishes (see workers.BuildHandler).
func CommitSourceKey(agentID, commit string) string {
	return "commits/" + agentID + "/" + commit + ".tar.gz"
}

// Create stores v.Archive and records it. The archive is written first and removed again when the
// record cannot be written, so a record always has its archive. An unknown agent is
// ErrAgentNotFound; a malformed digest is an *InvalidError. The archive's format is the bundle
// package's; the registry keeps the bytes without reading them.
func (s *SourceVersions) Create(ctx context.Context, v NewSourceVersion) (SourceVersion, error) {
	if !digestPattern.MatchString(v.Digest) {
		return SourceVersion{}, invalid("digest", `must be "sha256:" and 64 lowercase hex digits`)
	}
	sv := SourceVersion{ID: auth.NewID("v"), AgentID: v.AgentID, Digest: v.Digest, CreatedBy: v.CreatedBy, CreatedAt: time.Now().UTC()}
	sv.ObjectKey = SourceVersionKey(v.AgentID, sv.ID)
	sv.Size = int64(len(v.Archive))
	if err := s.objects.Put(ctx, sv.ObjectKey, bytes.NewReader(v.Archive), sv.Size); err != nil {
		return SourceVersion{}, fmt.Errorf("store source archive: %w", err)
	}
	if err := s.db.WithContext(ctx).Create(&sv).Error; err != nil {
		cleanup := context.WithoutCancel(ctx)
		if derr := s.objects.Delete(cleanup, sv.ObjectKey); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove orphaned archive: %w", derr))
		}
		if errors.Is(err, gorm.ErrForeignKeyViolated) {
			return SourceVersion{}, ErrAgentNotFound
		}
		return SourceVersion{}, fmt.Errorf("record source version: %w", err)
	}
	return sv, nil
}

// Get returns the source version id of agentID; one of another agent is ErrSourceVersionNotFound.
func (s *SourceVersions) Get(ctx context.Context, agentID, id string) (SourceVersion, error) {
	var sv SourceVersion
	err := s.db.WithContext(ctx).Where("id = ? AND agent_id = ?", id, agentID).Take(&sv).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return SourceVersion{}, ErrSourceVersionNotFound
	}
	if err != nil {
		return SourceVersion{}, fmt.Errorf("get source version: %w", err)
	}
	sv.CreatedAt = sv.CreatedAt.UTC()
	return sv, nil
}

// Newest returns the most recently created source version of agentID, or ErrSourceVersionNotFound.
func (s *SourceVersions) Newest(ctx context.Context, agentID string) (SourceVersion, error) {
	var sv SourceVersion
	err := s.db.WithContext(ctx).Where("agent_id = ?", agentID).Order("created_at DESC, id DESC").Take(&sv).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return SourceVersion{}, ErrSourceVersionNotFound
	}
	if err != nil {
		return SourceVersion{}, fmt.Errorf("newest source version: %w", err)
	}
	sv.CreatedAt = sv.CreatedAt.UTC()
	return sv, nil
}

// Open returns the archive (tar.gz) of the source version id of agentID; the caller closes it.
// A record whose archive is gone is an error wrapping ErrNotFound.
func (s *SourceVersions) Open(ctx context.Context, agentID, id string) (io.ReadCloser, SourceVersion, error) {
	sv, err := s.Get(ctx, agentID, id)
	if err != nil {
		return nil, SourceVersion{}, err
	}
	rc, _, err := s.objects.Get(ctx, sv.ObjectKey)
	if err != nil {
		return nil, SourceVersion{}, fmt.Errorf("open source archive %s: %w", sv.ObjectKey, err)
	}
	return rc, sv, nil
}
