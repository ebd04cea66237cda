package builder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"svc/agent"
)

// Default limits of a source tree (the agent package states them) and of one build (see Limits).
const (
	DefaultMaxFileSize  = agent.MaxFileSize // 5 MiB per file
	DefaultMaxTotalSize = agent.MaxTreeSize // 50 MiB across all files
	DefaultMaxFiles     = agent.MaxFiles    // regular files per tree, and folders per tree
	DefaultMaxDepth     = agent.MaxDepth    // path elements of a file or folder ("a/b/c.md" is 3)
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
	// ErrTooDeep means a path has more elements than Limits.MaxDepth.
	ErrTooDeep = errors.New("builder: path too deep")
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
	// ErrBranchNotFound means BranchHead found no such branch on the remote.
	ErrBranchNotFound = errors.New("builder: branch not found in the repository")
	// ErrTimeout is the cancellation cause when Limits.Timeout expires.
	ErrTimeout = errors.New("builder: timed out")
	// ErrBadBundle means bundle bytes that are not a bundle this package wrote, or whose digest
	// does not match.
	ErrBadBundle = errors.New("builder: invalid bundle")
)

// fatalError marks an error that trying again cannot mend (a repository or branch that is not
// there, credentials refused); Permanent reports it.
type fatalError struct{ error }

func (e fatalError) Unwrap() error { return e.error }

func fatal(err error) error { return fatalError{err} }

// Permanent reports whether an error of FetchGit, BranchHead, ReadTarGz, FromFiles or Build stays
// the same when the call is made again: a source tree that breaks a rule or a limit, a build whose
// problems are listed, a bundle that does not open, bad input, a commit not on its branch, a
// repository or branch not found, credentials refused, or the build's own timeout. Anything else
// (the network, the object store) may pass, and is worth retrying.
func Permanent(err error) bool {
	var (
		fe fatalError
		se *SourceError
		be *BuildError
	)
	return errors.As(err, &fe) || errors.As(err, &se) || errors.As(err, &be) ||
		errors.Is(err, ErrBadBundle) || errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrCommitNotFound) ||
		errors.Is(err, ErrBranchNotFound) || errors.Is(err, ErrTimeout)
}

// Limits bound what a fetch or a build reads. A zero field takes its default (DefaultLimits); a
// tree exactly at a limit is accepted, one byte or one file more is refused. The tree limits can
// only be lowered: a field above its default takes the default, since every bundle must open under
// the default limits that a runner's reader applies (ReadBundle).
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
	// Timeout bounds one FetchGit or one Build, on top of the caller's ctx.
	Timeout time.Duration
}

// DefaultLimits returns the limits of CONTRACT §5: 5 MiB per file, 50 MiB per tree, 10,000 files
// and 10,000 folders, paths at most 32 elements deep, and a 10 minute timeout.
func DefaultLimits() Limits {
	return Limits{
		MaxFileSize:  DefaultMaxFileSize,
		MaxTotalSize: DefaultMaxTotalSize,
		MaxFiles:     DefaultMaxFiles,
		MaxDepth:     DefaultMaxDepth,
		Timeout:      DefaultTimeout,
	}
}

// withDefaults fills the zero (or negative) fields of l from DefaultLimits and lowers the tree
// limits above their defaults to the defaults.
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
