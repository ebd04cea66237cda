package builder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"svc/agent"
)

// Default limits of a source tree and of one build (see Limits).
const (
	DefaultMaxFileSize  = 5 << 20  // 5 MiB per file
	DefaultMaxTotalSize = 50 << 20 // 50 MiB across all files
	DefaultMaxFiles     = 10_000   // regular files per tree
	DefaultTimeout      = 10 * time.Minute
)

// maxLinkHops bounds the symbolic links followed to resolve one path (as Linux's ELOOP does).
const maxLinkHops = 40

// Sentinel errors. Every error from this package that matches one of them also names the file or
// field concerned; match with errors.Is.
var (
	// ErrTooLarge means a file or the whole tree is over its size limit.
	ErrTooLarge = errors.New("builder: over the size limit")
	// ErrTooManyFiles means a tree holds more files (or folders) than Limits.MaxFiles.
	ErrTooManyFiles = errors.New("builder: too many files")
	// ErrUnsafePath means an absolute path, a ".." element, an invalid name, or a link that leaves
	// the tree.
	ErrUnsafePath = errors.New("builder: path escapes the tree")
	// ErrUnsupportedFile means a device, pipe, submodule, folder link, broken link or duplicate
	// entry, none of which a tree may hold.
	ErrUnsupportedFile = errors.New("builder: unsupported file")
	// ErrInvalidInput means a bad argument (URL, branch, commit, agent slug), named in the message.
	ErrInvalidInput = errors.New("builder: invalid input")
	// ErrCommitNotFound means the commit asked for is not on the branch fetched.
	ErrCommitNotFound = errors.New("builder: commit not found")
	// ErrTimeout is the cancellation cause when Limits.Timeout expires.
	ErrTimeout = errors.New("builder: timed out")
	// ErrBadBundle means bundle bytes that are not a bundle this package wrote, or whose digest
	// does not match.
	ErrBadBundle = errors.New("builder: invalid bundle")
)

// Limits bound what a fetch or a build reads. A zero field takes its default (DefaultLimits); a
// tree exactly at a limit is accepted, one byte or one file more is refused.
type Limits struct {
	// MaxFileSize is the largest file, in bytes.
	MaxFileSize int64
	// MaxTotalSize is the sum of all file sizes, in bytes.
	MaxTotalSize int64
	// MaxFiles is the number of regular files (a resolved symbolic link counts as a file). The
	// number of folders is bounded by the same figure.
	MaxFiles int
	// Timeout bounds one FetchGit or one Build, on top of the caller's ctx.
	Timeout time.Duration
}

// DefaultLimits returns the limits of CONTRACT §5: 5 MiB per file, 50 MiB per tree, 10,000 files,
// and a 10 minute timeout.
func DefaultLimits() Limits {
	return Limits{
		MaxFileSize:  DefaultMaxFileSize,
		MaxTotalSize: DefaultMaxTotalSize,
		MaxFiles:     DefaultMaxFiles,
		Timeout:      DefaultTimeout,
	}
}

// withDefaults fills the zero (or negative) fields of l from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = d.MaxFileSize
	}
	if l.MaxTotalSize <= 0 {
		l.MaxTotalSize = d.MaxTotalSize
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
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

// BuildError is returned by Build when the source tree is invalid. Problems lists every problem
// found (by agent.Load, or the one tree limit that stopped the read), each with its file.
type BuildError struct {
	Problems agent.Problems
}

// Error lists every problem, one per line, each with its file (and line where there is one).
func (e *BuildError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "  " + p.String()
	}
	noun := "problems"
	if len(e.Problems) == 1 {
		noun = "problem"
	}
	return fmt.Sprintf("builder: invalid source tree, %d %s:\n%s", len(e.Problems), noun, strings.Join(lines, "\n"))
}
