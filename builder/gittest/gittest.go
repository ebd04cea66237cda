// Package gittest makes real git repositories for tests: a folder committed with go-git, and a
// smart-HTTP server (git http-backend as CGI) on 127.0.0.1.
package gittest

import (
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a repository with a work tree.
type Repo struct {
	Dir  string
	Repo *git.Repository
}

// Init makes a repository at dir whose main branch holds the files of tree, and returns it with that commit.
func Init(t testing.TB, dir, tree string) (*Repo, string) {
	t.Helper()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Repo{Dir: dir, Repo: repo}
	return r, r.Commit(t, tree, "initial")
}

// Commit copies the files of tree (a folder; "" for none) into the work tree and commits
// everything, even when nothing changed. It returns the commit hash.
func (r *Repo) Commit(t testing.TB, tree, msg string) string {
	t.Helper()
	if tree != "" {
		err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(tree, p)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			dst := filepath.Join(r.Dir, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wt, err := r.Repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit(msg, &git.CommitOptions{AllowEmptyCommits: true, Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// Branch switches the work tree to branch, creating it from the current commit when missing.
func (r *Repo) Branch(t testing.TB, branch string) {
	t.Helper()
	wt, err := r.Repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	ref := plumbing.NewBranchReferenceName(branch)
	_, err = r.Repo.Reference(ref, false)
	if err := wt.Checkout(&git.CheckoutOptions{Branch: ref, Create: err != nil}); err != nil {
		t.Fatal(err)
	}
}

// HTTPServer serves the repositories under root over smart HTTP on 127.0.0.1 (a repository at
// root/x is at URL/x). wrap, when not nil, wraps the git handler (to stall or count requests).
func HTTPServer(t testing.TB, root string, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is required for this test: %v", err)
	}
	var h http.Handler = &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
