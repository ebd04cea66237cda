package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"regexp"
	"strings"

	"svc/bundle"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// GitSource names what FetchGit fetches.
type GitSource struct {
	// URL is the repository: http://, https:// or file:// (the last runs the machine's
	// git-upload-pack).
	URL string
	// Branch is the branch to fetch; empty means the remote's default branch (its HEAD).
	Branch string
	// Commit, when set, is the full 40-digit lower-case hex hash to check out. Empty means the
	// branch's head. It should be on Branch: a commit absent from the branch's history fails with
	// ErrCommitNotFound, except on servers that serve any reachable commit by hash
	// (uploadpack.allowReachableSHA1InWant), where it is fetched wherever it is.
	Commit string
	// Auth holds HTTP basic credentials, resolved by the caller (env: references, agent secrets);
	// nil for none.
	Auth *GitAuth
}

// FetchResult describes the commit FetchGit read.
type FetchResult struct {
	Commit  string // full hex hash
	Branch  string // short branch name (the remote's default branch when none was asked for)
	Message string // the commit message, trailing newlines removed
}

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// FetchGit fetches one commit of a git repository into memory and returns its tree: FetchCommit,
// then GitCommit.Tree. ctx and limits.Timeout bound the whole fetch; on timeout the error wraps
// ErrTimeout.
func FetchGit(ctx context.Context, src GitSource, limits Limits) (fs.FS, FetchResult, error) {
	limits = limits.withDefaults()
	ctx, cancel := context.WithTimeoutCause(ctx, limits.Timeout, ErrTimeout)
	defer cancel()
	c, err := FetchCommit(ctx, src, limits)
	if err != nil {
		return nil, FetchResult{}, err
	}
	fsys, err := c.Tree(ctx)
	if err != nil {
		return nil, FetchResult{}, err
	}
	return fsys, c.Result(), nil
}

// GitCommit is one commit fetched into memory by FetchCommit, with every object of its tree, of
// which nothing is read until asked: Files reads named files only, Tree the whole tree. Its
// methods may be called from one goroutine at a time.
type GitCommit struct {
	repo   *git.Repository
	root   *object.Tree
	src    GitSource
	limits Limits
	result FetchResult
}

// FetchCommit fetches one commit of a git repository into memory without reading its files: a
// shallow (depth 1) clone of the branch with no checkout; when Commit is given and is not the
// branch head, a shallow fetch of that commit, then, when the server refuses that, a full fetch
// of the branch. Nothing touches the disk. (go-git v5 cannot ask the server to leave blobs out, so
// the clone carries the commit's whole tree; what is saved is reading it.) ctx and limits.Timeout
// bound the fetch; on timeout the error wraps ErrTimeout. limits (zero fields take their defaults)
// also bound what the commit's Files and Tree read.
func FetchCommit(ctx context.Context, src GitSource, limits Limits) (*GitCommit, error) {
	limits = limits.withDefaults()
	if err := src.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, limits.Timeout, ErrTimeout)
	defer cancel()

	repo, head, err := cloneBranch(ctx, src, 1)
	if err != nil {
		return nil, err
	}
	want := head.Hash()
	if src.Commit != "" {
		want = plumbing.NewHash(src.Commit)
	}
	commit, err := repo.CommitObject(want)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		repo, commit, err = fetchCommit(ctx, repo, src, want)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch %s: read commit %s: %w", src.redactedURL(), want, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("fetch %s: read tree of %s: %w", src.redactedURL(), want, err)
	}
	return &GitCommit{
		repo: repo, root: root, src: src, limits: limits,
		result: FetchResult{
			Commit:  commit.Hash.String(),
			Branch:  head.Name().Short(),
			Message: strings.TrimRight(commit.Message, "\n"),
		},
	}, nil
}

// Result describes the commit.
func (c *GitCommit) Result() FetchResult { return c.result }

// Tree reads the commit's whole tree under the limits, with the rules of bundle.TreeBuilder: a
// symbolic link to a file inside the tree becomes a copy of it; a link that leaves the tree, a
// link to a folder and a submodule fail with the path named. ctx and the limits' Timeout bound
// the read.
func (c *GitCommit) Tree(ctx context.Context) (fs.FS, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, c.limits.Timeout, ErrTimeout)
	defer cancel()
	tree, err := readGitTree(ctx, c.repo, c.root, c.limits)
	if err != nil {
		return nil, err
	}
	return tree, nil
}

// Files returns a tree of only the named files of the commit (slash paths; a name the commit does
// not have is left out), read under the limits without reading any other file: what a check of
// svc.json needs before the whole tree is worth reading. A named entry that is not a regular file
// (a link, a folder) can only be resolved against the whole tree, so Files then returns Tree.
func (c *GitCommit) Files(ctx context.Context, names ...string) (fs.FS, error) {
	b := bundle.NewTreeBuilder(c.limits.Tree)
	for _, name := range names {
		e, err := c.root.FindEntry(name)
		switch {
		case errors.Is(err, object.ErrEntryNotFound), errors.Is(err, object.ErrDirectoryNotFound):
			continue
		case err != nil:
			return nil, sourceErr(name, bundle.ErrUnsupportedFile, "cannot read: %v", err)
		}
		switch e.Mode {
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
			blob, err := c.repo.BlobObject(e.Hash)
			if err != nil {
				return nil, sourceErr(name, bundle.ErrUnsupportedFile, "cannot read file: %v", err)
			}
			if err := b.AddFile(name, blob.Size, func() ([]byte, error) { return readBlob(blob) }); err != nil {
				return nil, err
			}
		default:
			return c.Tree(ctx)
		}
	}
	tree, err := b.Finish()
	if err != nil {
		return nil, err
	}
	return tree, nil
}

// BranchHead returns the head commit of src.Branch on the remote, as `git ls-remote` lists it,
// without fetching anything; src.Commit is ignored. A branch the remote does not have is an error
// wrapping ErrBranchNotFound; errors name the repository with any password hidden.
func BranchHead(ctx context.Context, src GitSource) (string, error) {
	src.Commit = ""
	if err := src.validate(); err != nil {
		return "", err
	}
	if src.Branch == "" {
		return "", fmt.Errorf("%w: BranchHead needs a branch", ErrInvalidInput)
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{src.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: src.auth()})
	if err != nil {
		return "", fmt.Errorf("list %s: %w", src.redactedURL(), err)
	}
	want := plumbing.NewBranchReferenceName(src.Branch)
	for _, r := range refs {
		if r.Name() == want {
			return r.Hash().String(), nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrBranchNotFound, src.Branch)
}

// validate checks the fields of src, naming the one at fault.
func (src GitSource) validate() error {
	u, err := url.Parse(src.URL)
	switch {
	case src.URL == "":
		return fmt.Errorf("%w: git URL is empty", ErrInvalidInput)
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return fmt.Errorf("%w: git URL cannot be parsed: %w", ErrInvalidInput, err)
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file":
		return fmt.Errorf("%w: git URL %s: scheme %q is not supported (http, https or file)", ErrInvalidInput, src.redactedURL(), u.Scheme)
	case u.Scheme == "file" && u.Path == "":
		return fmt.Errorf("%w: git URL %s has no path", ErrInvalidInput, src.redactedURL())
	case u.Scheme != "file" && u.Host == "":
		return fmt.Errorf("%w: git URL %s has no host", ErrInvalidInput, src.redactedURL())
	}
	if src.Branch != "" {
		if err := plumbing.NewBranchReferenceName(src.Branch).Validate(); err != nil || strings.HasPrefix(src.Branch, "refs/") {
			return fmt.Errorf("%w: branch %q is not a valid branch name", ErrInvalidInput, src.Branch)
		}
	}
	if src.Commit != "" && !commitPattern.MatchString(src.Commit) {
		return fmt.Errorf("%w: commit %q is not a full 40-digit lower-case hex hash", ErrInvalidInput, src.Commit)
	}
	return nil
}

// redactedURL is the URL with any password in it replaced by "xxxxx".
func (src GitSource) redactedURL() string {
	u, err := url.Parse(src.URL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func (src GitSource) auth() transport.AuthMethod {
	if src.Auth == nil {
		return nil
	}
	return &githttp.BasicAuth{Username: src.Auth.Username, Password: src.Auth.Password}
}

// cloneBranch clones src's branch (depth 0: whole history) into memory, without a worktree, and
// returns the repository and the branch reference.
func cloneBranch(ctx context.Context, src GitSource, depth int) (*git.Repository, *plumbing.Reference, error) {
	opts := &git.CloneOptions{
		URL:          src.URL,
		Auth:         src.auth(),
		SingleBranch: true,
		Depth:        depth,
		Tags:         git.NoTags,
		NoCheckout:   true,
	}
	if src.Branch != "" {
		opts.ReferenceName = plumbing.NewBranchReferenceName(src.Branch)
	}
	repo, err := git.CloneContext(ctx, memory.NewStorage(), nil, opts)
	if err != nil {
		return nil, nil, fetchErr(ctx, src, err)
	}
	head, err := repo.Head()
	if err != nil {
		return nil, nil, fmt.Errorf("fetch %s: read HEAD: %w", src.redactedURL(), err)
	}
	return repo, head, nil
}

// fetchCommit brings commit want into repo with a shallow fetch of the commit itself, which servers
// allow when they advertise allow-reachable-sha1-in-want (or tip); else it clones the whole branch
// afresh. It returns the repository that holds the commit.
func fetchCommit(ctx context.Context, repo *git.Repository, src GitSource, want plumbing.Hash) (*git.Repository, *object.Commit, error) {
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []config.RefSpec{config.RefSpec(want.String() + ":refs/svc/want")},
		Depth:    1,
		Auth:     src.auth(),
		Tags:     git.NoTags,
	})
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		if commit, err := repo.CommitObject(want); err == nil {
			return repo, commit, nil
		}
	}
	if ctxErr := context.Cause(ctx); ctxErr != nil {
		return nil, nil, fetchErr(ctx, src, ctxErr)
	}
	full, _, err := cloneBranch(ctx, src, 0)
	if err != nil {
		return nil, nil, err
	}
	commit, err := full.CommitObject(want)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		branch := src.Branch
		if branch == "" {
			branch = "(default)"
		}
		return nil, nil, fmt.Errorf("%w: %s is not on branch %s of %s", ErrCommitNotFound, want, branch, src.redactedURL())
	}
	return full, commit, err
}

// fetchErr names the repository and branch in a transport error, and reports a done ctx as
// such (with ErrTimeout when the timeout fired).
func fetchErr(ctx context.Context, src GitSource, err error) error {
	what := src.redactedURL()
	if src.Branch != "" {
		what += " branch " + src.Branch
	}
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("fetch %s: %w", what, cause)
	}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return fatal(fmt.Errorf("fetch %s: credentials missing or refused: %w", what, err))
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fatal(fmt.Errorf("fetch %s: repository not found: %w", what, err))
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return fatal(fmt.Errorf("fetch %s: repository is empty: %w", what, err))
	case errors.Is(err, plumbing.ErrReferenceNotFound), strings.Contains(err.Error(), "couldn't find remote ref"):
		return fatal(fmt.Errorf("fetch %s: branch not found: %w", what, err))
	}
	return fmt.Errorf("fetch %s: %w", what, err)
}

// readGitTree reads a commit's tree into a bundle.Tree. Blob sizes are checked before any blob
// is read.
func readGitTree(ctx context.Context, repo *git.Repository, root *object.Tree, limits Limits) (*bundle.Tree, error) {
	b := bundle.NewTreeBuilder(limits.Tree)
	type pendingTree struct {
		dir   string
		tree  *object.Tree
		depth int
	}
	stack := []pendingTree{{dir: ".", tree: root}}
	for len(stack) > 0 {
		if err := context.Cause(ctx); err != nil {
			return nil, fmt.Errorf("read git tree: %w", err)
		}
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range cur.tree.Entries {
			p := e.Name
			if cur.dir != "." {
				p = cur.dir + "/" + e.Name
			}
			if strings.Contains(e.Name, "/") || e.Name == "" {
				return nil, sourceErr(p, bundle.ErrUnsafePath, "invalid name %q in git tree", e.Name)
			}
			switch e.Mode {
			case filemode.Dir:
				if err := b.AddDir(p); err != nil {
					return nil, err
				}
				sub, err := repo.TreeObject(e.Hash)
				if err != nil {
					return nil, sourceErr(p, bundle.ErrUnsupportedFile, "cannot read folder: %v", err)
				}
				stack = append(stack, pendingTree{dir: p, tree: sub, depth: cur.depth + 1})
			case filemode.Regular, filemode.Executable, filemode.Deprecated:
				blob, err := repo.BlobObject(e.Hash)
				if err != nil {
					return nil, sourceErr(p, bundle.ErrUnsupportedFile, "cannot read file: %v", err)
				}
				if err := b.AddFile(p, blob.Size, func() ([]byte, error) { return readBlob(blob) }); err != nil {
					return nil, err
				}
			case filemode.Symlink:
				blob, err := repo.BlobObject(e.Hash)
				if err != nil {
					return nil, sourceErr(p, bundle.ErrUnsupportedFile, "cannot read symlink: %v", err)
				}
				if blob.Size > 4096 {
					return nil, sourceErr(p, bundle.ErrUnsupportedFile, "symlink target is %d bytes long", blob.Size)
				}
				target, err := readBlob(blob)
				if err != nil {
					return nil, sourceErr(p, bundle.ErrUnsupportedFile, "cannot read symlink: %v", err)
				}
				if err := b.AddLink(p, string(target)); err != nil {
					return nil, err
				}
			case filemode.Submodule:
				return nil, sourceErr(p, bundle.ErrUnsupportedFile, "git submodules are not supported")
			default:
				return nil, sourceErr(p, bundle.ErrUnsupportedFile, "unsupported git file mode %v", e.Mode)
			}
		}
	}
	return b.Finish()
}

// readBlob reads a blob; a blob whose content is not its stated size is an error.
func readBlob(blob *object.Blob) ([]byte, error) {
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close() //nolint:errcheck // in-memory object
	data, err := io.ReadAll(io.LimitReader(r, blob.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != blob.Size {
		return nil, fmt.Errorf("blob is %d bytes, not its stated %d", len(data), blob.Size)
	}
	return data, nil
}

// sourceErr builds a *bundle.SourceError about path p of a git tree.
func sourceErr(p string, kind error, format string, args ...any) error {
	return &bundle.SourceError{Path: p, Message: fmt.Sprintf(format, args...), Kind: kind}
}
