package builder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"svc/agent"
	"svc/bundle"
)

// DefaultTimeout bounds one fetch or one build (see Limits).
const DefaultTimeout = 10 * time.Minute

// Sentinel errors. Every error from this package that matches one of them also names the input
// concerned; match with errors.Is. Problems of the source tree itself are the bundle package's
// (bundle.SourceError and its kinds), and a bundle that does not open is bundle.ErrBadBundle.
var (
	// ErrInvalidInput means a bad argument (URL, branch, commit, agent slug), named in the message.
	ErrInvalidInput = errors.New("builder: invalid input")
	// ErrCommitNotFound means the commit asked for is not on the branch fetched.
	ErrCommitNotFound = errors.New("builder: commit not found")
	// ErrBranchNotFound means BranchHead found no such branch on the remote.
	ErrBranchNotFound = errors.New("builder: branch not found in the repository")
	// ErrTimeout is the cancellation cause when Limits.Timeout expires.
	ErrTimeout = errors.New("builder: timed out")
)

// fatalError marks an error that trying again cannot mend (a repository or branch that is not
// there, credentials refused); Permanent reports it.
type fatalError struct{ error }

func (e fatalError) Unwrap() error { return e.error }

func fatal(err error) error { return fatalError{err} }

// Permanent reports whether an error of FetchGit, FetchCommit, BranchHead or Build (or of the
// bundle package's tree readers) stays the same when the call is made again: a source tree that
// breaks a rule or a limit, a build whose problems are listed, a bundle that does not open, bad
// input, a commit not on its branch, a repository or branch not found, credentials refused, or
// the build's own timeout. Anything else (the network, the object store) may pass, and is worth
// retrying.
func Permanent(err error) bool {
	var (
		fe fatalError
		se *bundle.SourceError
		be *BuildError
	)
	return errors.As(err, &fe) || errors.As(err, &se) || errors.As(err, &be) ||
		errors.Is(err, bundle.ErrBadBundle) || errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrCommitNotFound) ||
		errors.Is(err, ErrBranchNotFound) || errors.Is(err, ErrTimeout)
}

// Limits bound what a fetch or a build reads, and how long it takes. A zero field takes its
// default (DefaultLimits).
type Limits struct {
	// Tree bounds the source tree (see bundle.Limits: the tree limits can only be lowered).
	Tree bundle.Limits
	// Timeout bounds one FetchGit, FetchCommit, GitCommit.Tree or Build, on top of the caller's ctx.
	Timeout time.Duration
}

// DefaultLimits returns the limits of CONTRACT §5: bundle.DefaultLimits for the tree (5 MiB per
// file, 50 MiB per tree, 10,000 files and 10,000 folders, paths at most 32 elements deep), and a
// 10 minute timeout.
func DefaultLimits() Limits {
	return Limits{Tree: bundle.DefaultLimits(), Timeout: DefaultTimeout}
}

// withDefaults fills a zero (or negative) Timeout; the bundle package applies the tree's defaults.
func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	return l
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
