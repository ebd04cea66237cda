package bundle

import (
	"errors"
	"fmt"

	"svc/agent"
)

// Default limits of a source tree: the agent package states them, and every bundle's tree is
// within them.
const (
	DefaultMaxFileSize  = agent.MaxFileSize // 5 MiB per file
	DefaultMaxTotalSize = agent.MaxTreeSize // 50 MiB across all files
	DefaultMaxFiles     = agent.MaxFiles    // regular files per tree, and folders per tree
	DefaultMaxDepth     = agent.MaxDepth    // path elements of a file or folder ("a/b/c.md" is 3)
)

// maxLinkHops bounds the symbolic links followed to resolve one path (as Linux's ELOOP does).
const maxLinkHops = 40

// Sentinel errors. Every error from this package that matches one of them also names the file or
// field concerned; match with errors.Is.
var (
	// ErrTooLarge means a file or the whole tree is over its size limit.
	ErrTooLarge = errors.New("bundle: over the size limit")
	// ErrTooManyFiles means a tree holds more files (or folders) than Limits.MaxFiles.
	ErrTooManyFiles = errors.New("bundle: too many files")
	// ErrTooDeep means a path has more elements than Limits.MaxDepth.
	ErrTooDeep = errors.New("bundle: path too deep")
	// ErrUnsafePath means an absolute path, a ".." element, an invalid name, or a link that leaves
	// the tree.
	ErrUnsafePath = errors.New("bundle: path escapes the tree")
	// ErrUnsupportedFile means a device, pipe, submodule, folder link, broken link or duplicate
	// entry, none of which a tree may hold.
	ErrUnsupportedFile = errors.New("bundle: unsupported file")
	// ErrBadBundle means bundle bytes that are not a bundle this package wrote, or whose digest
	// does not match.
	ErrBadBundle = errors.New("bundle: invalid bundle")
)

// Limits bound a source tree. A zero field takes its default (DefaultLimits); a tree exactly at a
// limit is accepted, one byte or one file more is refused. The limits can only be lowered: a field
// above its default takes the default, since every bundle must open under the default limits that
// a runner's reader applies (Unpack).
type Limits struct {
	// MaxFileSize is the largest file, in bytes.
	MaxFileSize int64
	// MaxTotalSize is the sum of all file sizes, in bytes.
	MaxTotalSize int64
	// MaxFiles is the number of regular files (a resolved symbolic link counts as a file). The
	// number of folders, counting every folder a path passes through, is bounded by the same figure.
	MaxFiles int
	// MaxDepth is the number of elements of the longest path ("a/b/c.md" is 3).
	MaxDepth int
}

// DefaultLimits returns the limits of CONTRACT §5: 5 MiB per file, 50 MiB per tree, 10,000 files
// and 10,000 folders, paths at most 32 elements deep.
func DefaultLimits() Limits {
	return Limits{
		MaxFileSize:  DefaultMaxFileSize,
		MaxTotalSize: DefaultMaxTotalSize,
		MaxFiles:     DefaultMaxFiles,
		MaxDepth:     DefaultMaxDepth,
	}
}

// withDefaults fills the zero (or negative) fields of l from DefaultLimits and lowers the limits
// above their defaults to the defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFileSize <= 0 || l.MaxFileSize > d.MaxFileSize {
		l.MaxFileSize = d.MaxFileSize
	}
	if l.MaxTotalSize <= 0 || l.MaxTotalSize > d.MaxTotalSize {
		l.MaxTotalSize = d.MaxTotalSize
	}
	if l.MaxFiles <= 0 || l.MaxFiles > d.MaxFiles {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxDepth <= 0 || l.MaxDepth > d.MaxDepth {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// SourceError is a problem with one path of a source tree; Path is "." for the tree as a whole
// (totals). Kind is one of the sentinels (ErrTooLarge, ErrUnsafePath, ...) and matches with errors.Is.
type SourceError struct {
	Path    string
	Message string
	Kind    error
}

// Error returns "<path>: <message>".
func (e *SourceError) Error() string { return e.Path + ": " + e.Message }

// Unwrap returns Kind.
func (e *SourceError) Unwrap() error { return e.Kind }

// sourceErr builds a *SourceError.
func sourceErr(p string, kind error, format string, args ...any) error {
	return &SourceError{Path: p, Message: fmt.Sprintf(format, args...), Kind: kind}
}
